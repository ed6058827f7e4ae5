//! The calls a group answers only for the pool over several groups: the steps of an
//! extraction over groups after its anchor call (`xend.lua`, `xundo.lua`), counters raised to a
//! common floor (`raise.lua`), a lease copied from the home group (`lease_mirror.lua`),
//! what an upsert must know to split a batch (`known.lua`) and the pinned group count
//! (`groups.lua`).

use crate::codec::clamp_ms;
use crate::group::{GroupPool, Side};
use crate::reply::Reply;
use proxypool_core::{Lease, PoolError, PoolResult, ProxyRecord, UnixMillis, UpstreamId};

/// Which counter [`GroupPool::raise`] raises.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counter<'a> {
    Epoch,
    Snapshot(&'a str),
}

/// How the anchor group ends an extraction's claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimEnd {
    Complete,
    Abort,
}

impl GroupPool {
    /// Raises the counter to at least `value`; returns it afterwards.
    pub(crate) async fn raise(
        &self,
        now: UnixMillis,
        counter: Counter<'_>,
        value: u64,
    ) -> PoolResult<u64> {
        let (which, worker) = match counter {
            Counter::Epoch => ("epoch", ""),
            Counter::Snapshot(worker) => ("snapshot", worker),
        };
        let args = vec![which.to_owned(), worker.to_owned(), value.to_string()];
        self.call(&self.scripts.raise, now, Side::Read, args)
            .await?
            .number(0)
    }

    /// Writes (or, with `clear`, removes) this group's copy of the home group's `lease`.
    pub(crate) async fn mirror_lease(
        &self,
        now: UnixMillis,
        lease: &Lease,
        clear: bool,
    ) -> PoolResult<()> {
        let text = format!(
            "{}\t{}\t{}\t{}",
            lease.holder, lease.token, lease.acquired_at_ms, lease.expires_at_ms
        );
        let action = if clear { "clear" } else { "set" };
        let args = vec![lease.name.clone(), action.to_owned(), text];
        self.call(&self.scripts.lease_mirror, now, Side::Read, args)
            .await
            .map(|_| ())
    }

    /// The upstream's un-extracted count in this group, and which of `records` (the
    /// batch's, of this group) it holds a live record of that an upsert keeps rather than
    /// stores anew (`known.lua`).
    pub(crate) async fn known(
        &self,
        now: UnixMillis,
        upstream: &UpstreamId,
        records: &[&ProxyRecord],
    ) -> PoolResult<(u64, Vec<bool>)> {
        let mut args = Vec::with_capacity(records.len() + 1);
        args.push(upstream.to_string());
        args.extend(records.iter().map(|r| crate::codec::record::encode(r)));
        let reply = self
            .call(&self.scripts.known, now, Side::Read, args)
            .await?;
        let flags = reply.text(1)?;
        if flags.len() != records.len() {
            return Err(PoolError::corrupt("unexpected known reply"));
        }
        Ok((reply.number(0)?, flags.bytes().map(|b| b == b'1').collect()))
    }

    /// The group count the store is pinned to (`groups` when nobody pinned one before).
    pub(crate) async fn pin_groups(&self, groups: usize) -> PoolResult<usize> {
        let args = vec![groups.to_string()];
        let value = self
            .eval_expecting(&self.scripts.groups, 0, Side::Read, args, Some(""))
            .await?;
        let reply = crate::reply::parse(value, 0)?;
        usize::try_from(reply.number(0)?).map_err(|_| PoolError::corrupt("group count"))
    }

    /// Ends the extraction's claim `token` (see `xend.lua`), with the parts' `records`
    /// when it completes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn end_claim(
        &self,
        now: UnixMillis,
        keys: &ClaimKeys,
        token: &str,
        end: ClaimEnd,
        requested: u32,
        idempotency_ttl_ms: u64,
        held_ms: Option<u64>,
        records: Vec<String>,
    ) -> PoolResult<Reply> {
        let mut args = Vec::with_capacity(records.len() + 9);
        args.push(keys.response.clone());
        args.push(keys.claim.clone());
        args.push(token.to_owned());
        args.push(
            match end {
                ClaimEnd::Complete => "complete",
                ClaimEnd::Abort => "abort",
            }
            .to_owned(),
        );
        args.push(keys.client.clone());
        args.push(keys.digest.clone());
        args.push(requested.to_string());
        args.push(clamp_ms(idempotency_ttl_ms).to_string());
        args.push(
            held_ms
                .map(|ms| clamp_ms(ms).to_string())
                .unwrap_or_default(),
        );
        args.extend(records);
        self.call(&self.scripts.xend, now, Side::Write, args).await
    }

    /// Gives back the part stored at `part_key` (see `xundo.lua`).
    pub(crate) async fn undo_part(
        &self,
        now: UnixMillis,
        part_key: &str,
        client: &str,
    ) -> PoolResult<()> {
        let args = vec![part_key.to_owned(), client.to_owned()];
        self.call(&self.scripts.xundo, now, Side::Write, args)
            .await
            .map(|_| ())
    }
}

/// The names an extraction over groups is kept under in its anchor group, and who asks.
#[derive(Debug, Clone)]
pub(crate) struct ClaimKeys {
    pub(crate) response: String,
    pub(crate) claim: String,
    pub(crate) client: String,
    pub(crate) digest: String,
}
