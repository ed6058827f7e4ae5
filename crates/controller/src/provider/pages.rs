//! One round's walk over a vendor list's pages: follows the `next` URL in the body, the
//! `Link: rel="next"` header or a page-number / offset query parameter, under
//! `max_pages`, and returns every page's entries together or fails whole, so a half-read
//! list is never upserted.
//!
//! Every page URL passes the same [`HostRule`] as a redirect (a next link to another host
//! fails the round as `foreign_host`), and a next link back to a page already read fails
//! it as `page_loop`. The size cap covers all pages together; the timeout is per page.

use super::auth::{VendorAuth, set_query_param};
use super::entry::{EntryDefaults, ParsedList};
use super::failure::{FetchError, RoundError};
use super::fetch::{HostRule, Page, VendorClient};
use super::json::parse_json_page;
use super::text::parse_text;
use crate::clock::SharedClock;
use crate::config::{FieldMapConfig, ListFormat, PageStyle, ProviderConfig};
use reqwest::Url;
use std::collections::HashSet;

/// What a round needs to walk one upstream's list.
pub(crate) struct Walk<'a> {
    pub client: &'a VendorClient,
    pub provider: &'a ProviderConfig,
    pub defaults: &'a EntryDefaults,
    pub clock: &'a SharedClock,
}

impl Walk<'_> {
    /// Reads every page, or fails.
    pub(crate) async fn read(&self) -> Result<ParsedList, RoundError> {
        let provider = self.provider;
        let first = Url::parse(provider.url.as_deref().unwrap_or_default())
            .map_err(|_| FetchError::Request)?;
        let hosts = HostRule::new(&first, &provider.redirect_hosts);
        let auth = VendorAuth::of_provider(provider)?;
        let pagination = provider.pagination.as_ref();
        let max_pages = pagination.map_or(1, |p| p.max_pages);
        let mut budget = provider.max_bytes;
        let mut list = ParsedList::default();
        let mut seen = HashSet::new();
        let mut next = Some(match pagination {
            Some(p) if p.style == PageStyle::QueryParam => numbered(&first, p, 0),
            _ => first.clone(),
        });
        let mut pages: u32 = 0;
        while let Some(url) = next.take() {
            if pages == max_pages {
                return Err(FetchError::TooManyPages.into());
            }
            if !seen.insert(url.to_string()) {
                return Err(FetchError::PageLoop.into());
            }
            let page = self
                .client
                .page(url, &auth, &hosts, provider.timeout.as_duration(), budget)
                .await?;
            pages += 1;
            budget -= page.body.len();
            // Where a redirect led is a page read too: a link back to it is a loop.
            seen.insert(page.url.to_string());
            let (read, body_next) = self.parse(&page)?;
            let entries = read.entries();
            list.absorb(read);
            next = match pagination.map(|p| p.style) {
                None => None,
                Some(PageStyle::NextUrl) => resolve(&page, body_next)?,
                Some(PageStyle::LinkHeader) => resolve(&page, page.next_link.clone())?,
                Some(PageStyle::QueryParam) if entries == 0 => None,
                Some(PageStyle::QueryParam) => {
                    pagination.map(|p| numbered(&first, p, u64::from(pages)))
                }
            };
        }
        Ok(list)
    }

    /// One page's entries and, for a JSON body with a `next` pointer, the next URL.
    fn parse(&self, page: &Page) -> Result<(ParsedList, Option<String>), RoundError> {
        let provider = self.provider;
        match provider.format.unwrap_or(ListFormat::Text) {
            ListFormat::Text => {
                let text = std::str::from_utf8(&page.body)
                    .map_err(|_| RoundError::MalformedBody("text"))?;
                Ok((parse_text(text, self.defaults), None))
            }
            ListFormat::Json => {
                let default_fields = FieldMapConfig::default();
                let fields = provider.fields.as_ref().unwrap_or(&default_fields);
                let next = provider
                    .pagination
                    .as_ref()
                    .filter(|p| p.style == PageStyle::NextUrl)
                    .and_then(|p| p.next.as_deref());
                let parsed =
                    parse_json_page(&page.body, self.clock.now(), self.defaults, fields, next)
                        .map_err(|_| RoundError::MalformedBody("json"))?;
                Ok((parsed.list, parsed.next))
            }
        }
    }
}

/// A next link as written, resolved against the URL that answered.
fn resolve(page: &Page, link: Option<String>) -> Result<Option<Url>, FetchError> {
    link.map(|link| page.url.join(&link).map_err(|_| FetchError::BadNextLink))
        .transpose()
}

/// The list URL with the page parameter of the page after `read` pages.
fn numbered(first: &Url, p: &crate::config::PaginationConfig, read: u64) -> Url {
    let mut url = first.clone();
    let value = p.start.saturating_add(p.step.saturating_mul(read));
    set_query_param(
        &mut url,
        p.param.as_deref().unwrap_or("page"),
        &value.to_string(),
    );
    url
}
