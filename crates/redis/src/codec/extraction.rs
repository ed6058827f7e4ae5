//! Stored extraction responses (`idem:<extraction id>`): a header line `client \t digest \t
//! expires_at \t requested \t created_at \t held_until` (responses stored before
//! `held_until` existed have the first five), then one record line per proxy handed out (the
//! record as it was stored at extraction, credentials included, so a replay needs nothing
//! that may have expired since).

use super::{corrupt, parse_u64, record};
use proxypool_core::{
    ClientId, ExtractResponse, ExtractedProxy, ExtractionId, PoolResult, UnixMillis,
};

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
    if header.len() != 5 && header.len() != 6 {
        return Err(corrupt(what));
    }
    let client = ClientId::new(header[0]).map_err(|_| corrupt(what))?;
    let proxies = lines
        .map(|line| record::decode(line).map(|r| ExtractedProxy::from(&r)))
        .collect::<PoolResult<Vec<_>>>()?;
    Ok(StoredExtraction {
        expires_at_ms: parse_u64(header[2], what)?,
        response: ExtractResponse {
            id: id.clone(),
            client: client.clone(),
            requested: parse_u64(header[3], what)?
                .try_into()
                .map_err(|_| corrupt(what))?,
            returned: proxies.len() as u32,
            proxies,
            created_at_ms: parse_u64(header[4], what)?,
        },
        client,
    })
}
