//! CooldownStore: validation from core; the merge, the bound per proxy and the drop with
//! the record in `cooldowns_apply.lua` (helpers in `lib/cooldowns.lua`); session feedback in
//! `feedback_add.lua` / `feedback_list.lua`; `may_report.lua` says who a client is to a proxy it reports; `return_extracted.lua`
//! gives a proxy back.

use crate::codec::cooldown;
use crate::group::{GroupPool, Side};
use async_trait::async_trait;
use proxypool_core::cooldown::{
    MAX_COOLDOWNS_PER_PROXY, MAX_PROJECT_SCOPES_PER_PROXY, MAX_SESSION_FEEDBACK, validate_changes,
};
use proxypool_core::{
    ClientId, CooldownChange, CooldownReport, CooldownStore, DomainCooldown, PoolError, PoolResult,
    ProxyId, Reporter, ReturnOutcome, SessionFeedback, UnixMillis,
};

#[async_trait]
impl CooldownStore for GroupPool {
    async fn apply_cooldowns(
        &self,
        now: UnixMillis,
        changes: &[CooldownChange],
    ) -> PoolResult<CooldownReport> {
        validate_changes(changes)?;
        let mut args = Vec::with_capacity(2 + changes.len() * 7);
        args.push(MAX_COOLDOWNS_PER_PROXY.to_string());
        args.push(MAX_PROJECT_SCOPES_PER_PROXY.to_string());
        for change in changes {
            cooldown::change_args(change, &mut args);
        }
        let reply = self
            .call(&self.scripts.cooldowns_apply, now, Side::Write, args)
            .await?;
        Ok(CooldownReport {
            applied: reply.number(0)? as usize,
            unknown: reply.number(1)? as usize,
        })
    }

    async fn cooldowns_of(
        &self,
        now: UnixMillis,
        proxies: &[ProxyId],
    ) -> PoolResult<Vec<DomainCooldown>> {
        if proxies.is_empty() {
            return Ok(Vec::new());
        }
        let args = proxies.iter().map(ProxyId::to_string).collect();
        let reply = self
            .call(&self.scripts.cooldowns_of, now, Side::Read, args)
            .await?;
        let rows = reply.texts()?;
        if rows.len() % 2 != 0 {
            return Err(PoolError::corrupt("undecodable cooldowns in redis"));
        }
        rows.chunks_exact(2)
            .map(|row| cooldown::decode(&row[0], &row[1]))
            .collect()
    }

    async fn add_session_feedback(
        &self,
        now: UnixMillis,
        feedback: SessionFeedback,
    ) -> PoolResult<()> {
        let args = vec![
            feedback.id.clone(),
            crate::codec::clamp_ms(feedback.expires_at_ms).to_string(),
            cooldown::feedback_json(&feedback),
            MAX_SESSION_FEEDBACK.to_string(),
        ];
        self.call(&self.scripts.feedback_add, now, Side::Write, args)
            .await
            .map(|_| ())
    }

    async fn session_feedback(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> PoolResult<Vec<SessionFeedback>> {
        let limit = limit.min(MAX_SESSION_FEEDBACK);
        let reply = self
            .call(
                &self.scripts.feedback_list,
                now,
                Side::Read,
                vec![limit.to_string()],
            )
            .await?;
        reply
            .texts()?
            .iter()
            .map(|v| cooldown::decode_feedback(v))
            .collect()
    }

    async fn may_report(
        &self,
        now: UnixMillis,
        client: &ClientId,
        proxy: &ProxyId,
    ) -> PoolResult<Reporter> {
        let args = vec![client.to_string(), proxy.to_string()];
        let reply = self
            .call(&self.scripts.may_report, now, Side::Read, args)
            .await?;
        match reply.text(0)?.as_str() {
            "holder" => Ok(Reporter::Holder),
            "unheld" => Ok(Reporter::Unheld {
                lease_epoch: crate::codec::parse_opt_u64(&reply.text(1)?, "may_report reply")?,
            }),
            "no" => Ok(Reporter::No),
            other => Err(PoolError::corrupt(format!("may_report answered {other:?}"))),
        }
    }

    async fn return_extracted(
        &self,
        now: UnixMillis,
        client: &ClientId,
        proxy: &ProxyId,
    ) -> PoolResult<ReturnOutcome> {
        let args = vec![client.to_string(), proxy.to_string()];
        self.call(&self.scripts.return_extracted, now, Side::Write, args)
            .await
            .map(|_| ReturnOutcome::Returned)
    }
}
