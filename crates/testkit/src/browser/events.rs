//! DevTools events and what answers them: [`Event`], the calls a handler returns, and
//! [`ProxyAuth`], which answers a proxy's `407` over the Fetch domain.

use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A DevTools event: its method, parameters and the session it came from (`None`: the
/// browser's own).
#[derive(Debug, Clone)]
pub struct Event {
    pub method: String,
    pub params: Value,
    pub session: Option<String>,
}

/// What a handler answers an event with: calls (method, params) sent on its session.
pub type EventCalls = Vec<(String, Value)>;

pub(super) type EventHandler = Box<dyn FnMut(&Event) -> EventCalls + Send>;

/// Answers a proxy's credentials challenges over the Fetch domain, for a handler (see
/// [`Browser::answer_proxy_auth`]; a handler of one's own calls [`answer`](Self::answer)
/// and `Fetch.enable` with `handleAuthRequests`): each `Fetch.authRequired` from a proxy
/// gets `ProvideCredentials` once (a request challenged again, its credentials refused,
/// and any server's challenge get `CancelAuth`), each `Fetch.requestPaused` is continued
/// unchanged.
#[derive(Debug)]
pub struct ProxyAuth {
    username: String,
    password: String,
    answered: HashSet<String>,
    answers: ProxyAuthAnswers,
}

impl ProxyAuth {
    pub fn new(username: &str, password: &str) -> Self {
        ProxyAuth {
            username: username.to_owned(),
            password: password.to_owned(),
            answered: HashSet::new(),
            answers: ProxyAuthAnswers::default(),
        }
    }

    /// The count of challenges answered, shared with this.
    pub fn answers(&self) -> ProxyAuthAnswers {
        self.answers.clone()
    }

    /// The calls that answer `event` (none for other events).
    pub fn answer(&mut self, event: &Event) -> EventCalls {
        let request_id = event.params["requestId"].clone();
        match event.method.as_str() {
            "Fetch.requestPaused" => vec![(
                "Fetch.continueRequest".to_owned(),
                json!({ "requestId": request_id }),
            )],
            "Fetch.authRequired" => {
                let from_proxy = event.params["authChallenge"]["source"] == "Proxy";
                let first = self.answered.insert(request_id.to_string());
                let response = if from_proxy && first {
                    self.answers.0.fetch_add(1, Ordering::Relaxed);
                    json!({
                        "response": "ProvideCredentials",
                        "username": self.username,
                        "password": self.password,
                    })
                } else {
                    json!({ "response": "CancelAuth" })
                };
                vec![(
                    "Fetch.continueWithAuth".to_owned(),
                    json!({ "requestId": request_id, "authChallengeResponse": response }),
                )]
            }
            _ => Vec::new(),
        }
    }
}

/// How many proxy challenges a [`ProxyAuth`] has answered.
#[derive(Debug, Clone, Default)]
pub struct ProxyAuthAnswers(Arc<AtomicUsize>);

impl ProxyAuthAnswers {
    /// Challenges answered with the credentials so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}
