//! UsageReader: the usage keys `usage.lua` writes (in `report.lua` and `extract.lua`),
//! read by `usage_read.lua` in one script per call.

use crate::group::{GroupPool, Side};
use crate::reply;
use async_trait::async_trait;
use proxypool_core::usage::{ClientUsage, UpstreamAmounts, usage_horizon};
use proxypool_core::{ClientId, PoolError, PoolResult, UnixMillis, UpstreamId, UsageReader};
use std::collections::BTreeMap;

#[async_trait]
impl UsageReader for GroupPool {
    async fn usage(&self, now: UnixMillis, clients: &[ClientId]) -> PoolResult<Vec<ClientUsage>> {
        if clients.is_empty() {
            return Ok(Vec::new());
        }
        let args = clients.iter().map(ToString::to_string).collect();
        let value = self
            .eval(&self.scripts.usage_read, now, Side::Read, args)
            .await?;
        let texts = reply::items(value)?;
        if texts.len() != clients.len() {
            return Err(PoolError::corrupt("usage reply of the wrong length"));
        }
        clients
            .iter()
            .zip(texts)
            .map(|(client, text)| decode(now, client, &reply::text(&text)?))
            .collect()
    }
}

fn corrupt() -> PoolError {
    PoolError::corrupt("undecodable usage in redis")
}

/// One client's lines (see `usage_read.lua`).
fn decode(now: UnixMillis, client: &ClientId, text: &str) -> PoolResult<ClientUsage> {
    let mut totals = UpstreamAmounts::new();
    let mut minutes: BTreeMap<u64, UpstreamAmounts> = BTreeMap::new();
    let mut hours: BTreeMap<u64, UpstreamAmounts> = BTreeMap::new();
    let (first_minute, first_hour) = usage_horizon(now);
    for line in text.split('\n').filter(|line| !line.is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        let (amounts, rest) = match fields.as_slice() {
            ["T", rest @ ..] => (&mut totals, rest),
            [section @ ("M" | "H"), period, rest @ ..] => {
                let period: u64 = period.parse().map_err(|_| corrupt())?;
                let (periods, first) = if *section == "M" {
                    (&mut minutes, first_minute)
                } else {
                    (&mut hours, first_hour)
                };
                if period < first {
                    continue;
                }
                (periods.entry(period).or_default(), rest)
            }
            _ => return Err(corrupt()),
        };
        let [upstream, kind, amount] = rest else {
            return Err(corrupt());
        };
        let upstream = UpstreamId::new(upstream).map_err(|_| corrupt())?;
        let amount: u64 = amount.parse().map_err(|_| corrupt())?;
        if !amounts.entry(upstream).or_default().add_kind(kind, amount) {
            return Err(corrupt());
        }
    }
    Ok(ClientUsage::from_parts(
        client.clone(),
        &totals,
        &minutes,
        &hours,
    ))
}
