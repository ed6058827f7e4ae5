//! How a leader-only loop follows the terms: it parks until it leads
//! ([`wait_for_term`]) and runs each round only while its term lasts ([`while_leading`]).

use super::term::Term;
use std::future::Future;
use tokio::sync::watch;

/// Waits until this controller leads (or `shutdown` fires: then `None`).
pub(crate) async fn wait_for_term(
    leadership: &mut watch::Receiver<Option<Term>>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<Term> {
    loop {
        if *shutdown.borrow() {
            return None;
        }
        if let Some(term) = *leadership.borrow_and_update() {
            return Some(term);
        }
        tokio::select! {
            changed = leadership.changed() => if changed.is_err() { return None },
            _ = shutdown.changed() => {}
        }
    }
}

/// Runs one round of a singleton loop while `term` lasts. When the term ends first (lost,
/// lapsed, or replaced by a newer one) the round is dropped where it stands and `None`
/// comes back: a controller that no longer leads must not keep writing on the strength of
/// a term another controller may now hold. Rounds are made of atomic store calls, so
/// dropping one between (or during) calls leaves nothing half done.
pub(crate) async fn while_leading<F: Future>(
    term: Term,
    leadership: &mut watch::Receiver<Option<Term>>,
    round: F,
) -> Option<F::Output> {
    tokio::select! {
        output = round => Some(output),
        // A closed channel means the leadership is gone: as good as lost.
        _ = leadership.wait_for(|current| *current != Some(term)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_round_in_flight_is_dropped_when_the_term_ends() {
        let (sender, mut receiver) = watch::channel(Some(Term(3)));
        let flip = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            sender.send_replace(None);
            sender
        });
        let round = std::future::pending::<()>();
        assert_eq!(while_leading(Term(3), &mut receiver, round).await, None);
        let sender = flip.await.unwrap();

        // A newer term ends the old term's round too.
        sender.send_replace(Some(Term(4)));
        let slow = tokio::time::sleep(Duration::from_secs(60));
        assert_eq!(while_leading(Term(3), &mut receiver, slow).await, None);
        // A round in the current term finishes normally.
        assert_eq!(
            while_leading(Term(4), &mut receiver, async { 7 }).await,
            Some(7)
        );
    }

    #[tokio::test]
    async fn waiting_for_a_term_parks_until_one_comes_or_shutdown() {
        let (leader, mut leadership) = watch::channel(None);
        let (stop, mut shutdown) = watch::channel(false);
        let waiting = tokio::spawn(async move {
            let term = wait_for_term(&mut leadership, &mut shutdown).await;
            (term, leadership, shutdown)
        });
        leader.send_replace(Some(Term(9)));
        let (term, mut leadership, mut shutdown) = waiting.await.unwrap();
        assert_eq!(term, Some(Term(9)));
        leader.send_replace(None);
        stop.send_replace(true);
        assert_eq!(wait_for_term(&mut leadership, &mut shutdown).await, None);
    }
}
