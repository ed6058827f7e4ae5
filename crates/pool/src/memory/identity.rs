//! StoreIdentity for MemoryPool: the mark lives in the state; a new identity starts an empty
//! pool, as a new incarnation does in Redis.

use super::MemoryPool;
use super::state::State;
use async_trait::async_trait;
use proxypool_core::{
    Expectation, LossReason, PoolError, PoolResult, StoreIdentity, StoreMark, Unavailable,
    UnixMillis,
};

#[async_trait]
impl StoreIdentity for MemoryPool {
    async fn read_mark(&self) -> PoolResult<Option<StoreMark>> {
        Ok(self.lock_unchecked()?.mark.clone())
    }

    async fn install_mark(&self, _now: UnixMillis, mark: &StoreMark) -> PoolResult<StoreMark> {
        if !proxypool_core::store_mark::is_identity(&mark.identity) {
            return Err(PoolError::invalid("a store identity is 32 hex digits"));
        }
        let mut state = self.lock_unchecked()?;
        match &mut state.mark {
            Some(current) if current.identity == mark.identity => {
                current.generation = current.generation.max(mark.generation);
            }
            _ => {
                *state = State {
                    mark: Some(mark.clone()),
                    ..State::default()
                };
            }
        }
        Ok(state.mark.clone().unwrap_or_else(|| mark.clone()))
    }

    async fn advance_generation(&self, _now: UnixMillis) -> PoolResult<u64> {
        let mut state = self.lock()?;
        let mark = state
            .mark
            .as_mut()
            .ok_or(PoolError::Unavailable(Unavailable::StoreLost(
                LossReason::Missing,
            )))?;
        mark.generation += 1;
        Ok(mark.generation)
    }

    async fn end_recovery(&self, _now: UnixMillis) -> PoolResult<()> {
        let mut state = self.lock()?;
        if let Some(mark) = state.mark.as_mut() {
            mark.recovery = None;
        }
        Ok(())
    }

    fn expect(&self, expectation: Option<Expectation>) {
        *self.expected.write().unwrap_or_else(|e| e.into_inner()) = expectation;
    }
}
