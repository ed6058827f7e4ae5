//! Stored extraction responses (`idem:<extraction id>`): a header line (the layout below,
//! shared with `extract.lua`), then one record line per proxy handed out (the record as it
//! was stored at extraction, credentials included, so a replay needs nothing that may have
//! expired since).

use super::layout::tab_layout;
use super::{corrupt, parse_u64, record};
use proxypool_core::{
    ClientId, ExtractResponse, ExtractedProxy, ExtractionId, PoolResult, UnixMillis,
};

tab_layout! {
    count X_FIELDS;
    CLIENT => X_CLIENT,
    DIGEST => X_DIGEST,
    // The end of replay: the response's logical expiry.
    EXPIRES_AT => X_EXPIRES,
    REQUESTED => X_REQUESTED,
    CREATED_AT => X_CREATED,
    // How long the key stays held; the last field, missing in responses stored before it
    // existed (held until expiry then).
    HELD_UNTIL => X_HELD,
}

/// A stored response with what the store checks before replaying it.
#[derive(Debug)]
pub(crate) struct StoredExtraction {
    pub(crate) client: ClientId,
    pub(crate) expires_at_ms: UnixMillis,
    pub(crate) response: ExtractResponse,
}

pub(crate) fn decode(id: &ExtractionId, value: &str) -> PoolResult<StoredExtraction> {
    let what = "extraction";
    let mut lines = value.split('\n');
    let header: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
    // HELD_UNTIL is last: a header of HELD_UNTIL fields was stored before it existed.
    if header.len() != FIELDS && header.len() != HELD_UNTIL {
        return Err(corrupt(what));
    }
    let client = ClientId::new(header[CLIENT]).map_err(|_| corrupt(what))?;
    let proxies = lines
        .map(|line| record::decode(line).map(|r| ExtractedProxy::from(&r)))
        .collect::<PoolResult<Vec<_>>>()?;
    Ok(StoredExtraction {
        expires_at_ms: parse_u64(header[EXPIRES_AT], what)?,
        response: ExtractResponse {
            id: id.clone(),
            client: client.clone(),
            requested: parse_u64(header[REQUESTED], what)?
                .try_into()
                .map_err(|_| corrupt(what))?,
            returned: proxies.len() as u32,
            proxies,
            created_at_ms: parse_u64(header[CREATED_AT], what)?,
        },
        client,
    })
}
