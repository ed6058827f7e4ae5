//! How a list fetch authenticates: the headers, HTTP Basic and the query parameter an
//! upstream's provider names, built from resolved secrets and put on every request of a
//! round. Header values are marked sensitive, so neither a log nor a `Debug` shows them.

use super::failure::FetchError;
use crate::config::ProviderConfig;
use proxypool_core::Secret;
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use reqwest::{RequestBuilder, Url};

/// The authentication of one upstream's list fetch.
#[derive(Debug, Clone, Default)]
pub struct VendorAuth {
    headers: Vec<(HeaderName, HeaderValue)>,
    basic: Option<(String, Secret)>,
    query: Option<(String, Secret)>,
}

impl VendorAuth {
    /// No authentication.
    pub fn none() -> Self {
        VendorAuth::default()
    }

    /// Only an `Authorization` value (the `authorization` shorthand).
    pub fn authorization(value: Option<&Secret>) -> Result<Self, FetchError> {
        let mut auth = VendorAuth::none();
        if let Some(value) = value {
            auth.headers
                .push((AUTHORIZATION, sensitive(value.expose())?));
        }
        Ok(auth)
    }

    /// What the provider configures; a secret that cannot be a header value fails the
    /// round as `request` (the value itself is never shown).
    pub fn of_provider(provider: &ProviderConfig) -> Result<Self, FetchError> {
        let mut auth =
            VendorAuth::authorization(provider.authorization.as_ref().and_then(|a| a.plain()))?;
        let Some(configured) = &provider.auth else {
            return Ok(auth);
        };
        if let Some(header) = &configured.header {
            let secret = header.value.plain().ok_or(FetchError::Request)?;
            let name =
                HeaderName::from_bytes(header.name.as_bytes()).map_err(|_| FetchError::Request)?;
            let value = match &header.scheme {
                Some(scheme) => sensitive(&format!("{scheme} {}", secret.expose()))?,
                None => sensitive(secret.expose())?,
            };
            auth.headers.push((name, value));
        }
        if let Some(basic) = &configured.basic {
            let password = basic.password.plain().ok_or(FetchError::Request)?;
            auth.basic = Some((basic.username.clone(), password.clone()));
        }
        if let Some(query) = &configured.query {
            let value = query.value.plain().ok_or(FetchError::Request)?;
            auth.query = Some((query.name.clone(), value.clone()));
        }
        Ok(auth)
    }

    /// The URL as sent: the query key set (replacing one the vendor echoed in a link).
    pub(crate) fn url(&self, url: &Url) -> Url {
        let Some((name, value)) = &self.query else {
            return url.clone();
        };
        let mut sent = url.clone();
        set_query_param(&mut sent, name, value.expose());
        sent
    }

    /// The request with the headers and Basic credentials on it.
    pub(crate) fn apply(&self, mut request: RequestBuilder) -> RequestBuilder {
        for (name, value) in &self.headers {
            request = request.header(name.clone(), value.clone());
        }
        if let Some((user, password)) = &self.basic {
            // reqwest marks the Basic header sensitive itself.
            request = request.basic_auth(user, Some(password.expose()));
        }
        request
    }
}

fn sensitive(text: &str) -> Result<HeaderValue, FetchError> {
    let mut value = HeaderValue::from_str(text).map_err(|_| FetchError::Request)?;
    value.set_sensitive(true);
    Ok(value)
}

/// Sets `name=value` in `url`'s query, replacing every earlier value of `name` and
/// keeping the other parameters in order.
pub(crate) fn set_query_param(url: &mut Url, name: &str, value: &str) {
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(key, _)| key != name)
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    let mut pairs = url.query_pairs_mut();
    pairs.clear();
    for (key, value) in &kept {
        pairs.append_pair(key, value);
    }
    pairs.append_pair(name, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_key_replaces_an_echoed_one_and_keeps_the_rest() {
        let mut url = Url::parse("https://v.example/l?page=2&api_key=old&x=1").unwrap();
        set_query_param(&mut url, "api_key", "new key");
        assert_eq!(
            url.as_str(),
            "https://v.example/l?page=2&x=1&api_key=new+key"
        );
    }

    #[test]
    fn debug_never_shows_a_header_secret() {
        let auth =
            VendorAuth::authorization(Some(&Secret::new("Token hunter2".to_owned()))).unwrap();
        assert!(!format!("{auth:?}").contains("hunter2"));
    }
}
