//! [`ApiState`]: everything the routes share, built once from narrow inputs.
//!
//! The API sees the activity pool only through the four ports it calls, the quota through
//! [`QuotaPort`], and the controller through [`UpstreamStatusSource`] (and optionally
//! [`OwnershipWake`]). The controller or the CLI builds these and mounts [`crate::router`].

use crate::admission::address_slots::AddressSlots;
use crate::admission::feedback_rate::{FeedbackLimits, FeedbackRate};
use crate::admission::key_turns::KeyTurns;
use crate::admission::policy::{ClientPolicies, InFlight};
use crate::admission::quota_board::QuotaBoard;
use crate::admission::shield_limiter::Shield;
use crate::clients::{ApiClient, ClientDirectory};
use crate::config::{ApiConfigError, ApiLimits, ExtractionSettings, ShieldSettings};
use crate::controller_view::{OwnershipWake, UpstreamStatusSource};
use crate::readiness::ReadinessCache;
use crate::ticket_key::TicketKeyCache;
use crate::ui::session::SessionTable;
use crate::ui::sign_in_guard::SignInGuard;
use arc_swap::{ArcSwap, ArcSwapOption};
use proxypool_core::{
    ActivityPool, AdminStore, CooldownPolicy, CooldownStore, Extractor, InventoryReader,
    OwnershipRepository, ProxyLister, SecretHash, TicketKeyStore, UnixMillis, UsageReader,
    WorkerRuntimeStore,
};
use proxypool_metrics::MetricsHandle;
use proxypool_quota::QuotaPort;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// The stores and controller views the API calls.
#[derive(Debug, Clone)]
pub struct ApiPorts {
    pub extractor: Arc<dyn Extractor>,
    pub inventory: Arc<dyn InventoryReader>,
    pub runtime: Arc<dyn WorkerRuntimeStore>,
    pub ownership: Arc<dyn OwnershipRepository>,
    pub quota: Arc<dyn QuotaPort>,
    pub upstreams: Arc<dyn UpstreamStatusSource>,
    pub usage: Arc<dyn UsageReader>,
    /// Worker modes (cordon, drain) shared by every controller.
    pub admin: Arc<dyn AdminStore>,
    /// The operators' read-only listing of proxies (`GET /v1/admin/proxies`).
    pub proxies: Arc<dyn ProxyLister>,
    /// Cooldowns, session feedback and returned proxies (`POST /v1/feedback`).
    pub cooldowns: Arc<dyn CooldownStore>,
    /// The key the gateways' feedback tickets are checked with (`POST /v1/feedback`).
    pub tickets: Arc<dyn TicketKeyStore>,
}

impl ApiPorts {
    /// Every pool port from one activity-pool adapter (MemoryPool, RedisPool, or the
    /// controller's `Arc<dyn ActivityPool>`).
    pub fn from_pool(
        pool: Arc<dyn ActivityPool>,
        quota: Arc<dyn QuotaPort>,
        upstreams: Arc<dyn UpstreamStatusSource>,
    ) -> Self {
        ApiPorts {
            extractor: pool.clone(),
            inventory: pool.clone(),
            runtime: pool.clone(),
            ownership: pool.clone(),
            usage: pool.clone(),
            proxies: pool.clone(),
            cooldowns: pool.clone(),
            tickets: pool.clone(),
            admin: pool,
            quota,
            upstreams,
        }
    }
}

/// Shared state of the API routes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ApiState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    ports: ApiPorts,
    // Swapped whole on a configuration reload; requests read a consistent copy.
    clients: ArcSwap<ClientDirectory>,
    policies: ArcSwap<ClientPolicies>,
    /// `POST /v1/feedback`'s own bucket per client; rebuilt with the clients or the rate.
    feedback_limits: ArcSwap<FeedbackLimits>,
    in_flight: InFlight,
    /// Keyed extractions running, one attempt per key at a time.
    key_turns: KeyTurns,
    shield: Shield,
    limits: ApiLimits,
    extraction: ArcSwap<ExtractionSettings>,
    /// `[cooldowns]`, applied to clients' feedback; swapped on reload.
    cooldowns: ArcSwap<CooldownPolicy>,
    reloader: Option<Arc<dyn ConfigReloader>>,
    trusted_proxies: Vec<(std::net::IpAddr, u8)>,
    concurrency: Arc<Semaphore>,
    /// Requests in flight per address (`max_requests_in_flight_per_ip`).
    address_slots: Arc<AddressSlots>,
    metrics: Option<MetricsHandle>,
    /// The hash `GET /metrics` checks bearer tokens against (none: open); swapped on reload.
    metrics_token: ArcSwapOption<SecretHash>,
    /// `/metrics` shows per-client series without a metrics token (`dev` only).
    client_metrics_open: bool,
    ownership_wake: Option<Arc<dyn OwnershipWake>>,
    clock: fn() -> UnixMillis,
    /// The dashboard's sign-in sessions.
    ui_sessions: SessionTable,
    /// Failed dashboard sign-ins per address group.
    sign_in_guard: SignInGuard,
    /// Whether the dashboard's cookie is always `Secure` and `__Host-` named (the listener is
    /// TLS, or `[api] secure_cookies` says a TLS-terminating balancer is in front).
    secure_cookies: bool,
    quota_board: QuotaBoard,
    /// `/readyz`'s shared, short-lived result.
    readiness: Arc<ReadinessCache>,
    /// The store's feedback-ticket key, once read.
    ticket_key: TicketKeyCache,
}

/// Re-reads the configuration of the process the API runs in (`POST /v1/admin/reload`)
/// and tells how the last reload went (`GET /v1/admin/reload`).
#[async_trait::async_trait]
pub trait ConfigReloader: Send + Sync + std::fmt::Debug {
    /// Reloads now; the report says what was applied, refused or needs a restart.
    async fn reload(&self) -> serde_json::Value;
    /// The last reload's report (or that none happened yet).
    fn last(&self) -> serde_json::Value;
}

/// Collects the optional parts of an [`ApiState`].
#[must_use]
#[derive(Debug)]
pub struct ApiStateBuilder {
    ports: ApiPorts,
    clients: Vec<ApiClient>,
    limits: ApiLimits,
    extraction: ExtractionSettings,
    cooldowns: CooldownPolicy,
    feedback_rate: FeedbackRate,
    shield: ShieldChoice,
    metrics: Option<MetricsHandle>,
    metrics_token: Option<SecretHash>,
    client_metrics_open: bool,
    ownership_wake: Option<Arc<dyn OwnershipWake>>,
    reloader: Option<Arc<dyn ConfigReloader>>,
    trusted_proxies: Vec<(std::net::IpAddr, u8)>,
    clock: fn() -> UnixMillis,
    secure_cookies: bool,
}

#[derive(Debug)]
enum ShieldChoice {
    Settings(ShieldSettings),
    Ready(Shield),
}

impl ApiStateBuilder {
    pub fn limits(mut self, limits: ApiLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn extraction(mut self, extraction: ExtractionSettings) -> Self {
        self.extraction = extraction;
        self
    }

    /// How many feedback calls each client may make (default: `[cooldowns]`'s defaults).
    pub fn feedback_rate(mut self, rate: FeedbackRate) -> Self {
        self.feedback_rate = rate;
        self
    }

    /// How feedback grows cooldowns (default: `[cooldowns]`'s defaults).
    pub fn cooldowns(mut self, policy: CooldownPolicy) -> Self {
        self.cooldowns = policy;
        self
    }

    /// The shield policy (default: [`ShieldSettings::default`]); the API starts its sweeper.
    pub fn shield_settings(mut self, settings: ShieldSettings) -> Self {
        self.shield = ShieldChoice::Settings(settings);
        self
    }

    /// A ready shield (e.g. [`Shield::from_limiter`] on a manual clock).
    pub fn shield(mut self, shield: Shield) -> Self {
        self.shield = ShieldChoice::Ready(shield);
        self
    }

    /// Serves `GET /metrics` from this handle (see `proxypool_metrics::install`).
    /// Without one, `/metrics` answers 404.
    pub fn metrics(mut self, handle: MetricsHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// Lets a worker mode change run the controller's ownership manager at once.
    pub fn ownership_wake(mut self, wake: Arc<dyn OwnershipWake>) -> Self {
        self.ownership_wake = Some(wake);
        self
    }

    /// The clock handed to the ports as `now` (default: the wall clock).
    pub fn clock(mut self, clock: fn() -> UnixMillis) -> Self {
        self.clock = clock;
        self
    }

    /// `GET /metrics` then requires `Authorization: Bearer` with a token of this hash.
    pub fn metrics_token(mut self, token: Option<SecretHash>) -> Self {
        self.metrics_token = token;
        self
    }

    /// Without a metrics token, `/metrics` still shows the series with a `client` label
    /// (default: they are left out). For `dev`, where the one client is the operator's.
    pub fn client_metrics_open(mut self, open: bool) -> Self {
        self.client_metrics_open = open;
        self
    }

    /// Load balancers whose `X-Forwarded-For` names the client (address, prefix length).
    pub fn trusted_proxies(mut self, blocks: Vec<(std::net::IpAddr, u8)>) -> Self {
        self.trusted_proxies = blocks;
        self
    }

    /// What `POST /v1/admin/reload` calls (without one, the route answers 404).
    pub fn reloader(mut self, reloader: Arc<dyn ConfigReloader>) -> Self {
        self.reloader = Some(reloader);
        self
    }

    /// Marks the dashboard's session cookie `Secure` and names it `__Host-` on every
    /// sign-in (set it when the listener is TLS or a TLS-terminating balancer is in front;
    /// without it, only a trusted balancer's `X-Forwarded-Proto: https` does).
    pub fn secure_cookies(mut self, secure: bool) -> Self {
        self.secure_cookies = secure;
        self
    }

    /// Validates everything and builds the state.
    pub fn build(self) -> Result<ApiState, ApiConfigError> {
        crate::config::first_problem(self.limits.problems())?;
        crate::config::first_problem(self.extraction.problems())?;
        let clients = ClientDirectory::new(self.clients)?;
        let policies = client_policies(&clients, None)?;
        let feedback_limits = feedback_limits(&clients, self.feedback_rate, None)?;
        crate::metrics::describe();
        let shield = match self.shield {
            ShieldChoice::Settings(settings) => Shield::from_settings(&settings)?,
            ShieldChoice::Ready(shield) => shield,
        };
        Ok(ApiState {
            inner: Arc::new(Inner {
                concurrency: Arc::new(Semaphore::new(self.limits.max_concurrent_requests)),
                address_slots: AddressSlots::new(
                    self.limits.max_requests_in_flight_per_ip,
                    self.limits.ipv6_prefix,
                ),
                ports: self.ports,
                clients: ArcSwap::from_pointee(clients),
                policies: ArcSwap::new(policies),
                feedback_limits: ArcSwap::new(feedback_limits),
                in_flight: InFlight::default(),
                key_turns: KeyTurns::default(),
                shield,
                limits: self.limits,
                extraction: ArcSwap::from_pointee(self.extraction),
                cooldowns: ArcSwap::from_pointee(self.cooldowns),
                reloader: self.reloader,
                trusted_proxies: self.trusted_proxies,
                metrics: self.metrics,
                metrics_token: ArcSwapOption::new(self.metrics_token.map(Arc::new)),
                client_metrics_open: self.client_metrics_open,
                ownership_wake: self.ownership_wake,
                clock: self.clock,
                ui_sessions: SessionTable::default(),
                sign_in_guard: SignInGuard::default(),
                secure_cookies: self.secure_cookies,
                quota_board: QuotaBoard::default(),
                readiness: Arc::default(),
                ticket_key: TicketKeyCache::default(),
            }),
        })
    }
}

impl ApiState {
    /// Starts a state from the ports and the configured clients.
    pub fn builder(ports: ApiPorts, clients: Vec<ApiClient>) -> ApiStateBuilder {
        ApiStateBuilder {
            ports,
            clients,
            limits: ApiLimits::default(),
            extraction: ExtractionSettings::default(),
            cooldowns: proxypool_config::CooldownsConfig::default().policy(),
            feedback_rate: FeedbackRate::default(),
            shield: ShieldChoice::Settings(ShieldSettings::default()),
            metrics: None,
            metrics_token: None,
            client_metrics_open: false,
            ownership_wake: None,
            reloader: None,
            trusted_proxies: Vec::new(),
            clock: proxypool_core::now_millis,
            secure_cookies: false,
        }
    }

    /// Replaces the clients (a configuration reload): requests authenticated from now on
    /// see the new set; a request already past authentication finishes as it started.
    pub fn replace_clients(&self, clients: Vec<ApiClient>) -> Result<(), ApiConfigError> {
        let directory = ClientDirectory::new(clients)?;
        let policies = client_policies(&directory, Some(&self.inner.policies.load_full()))?;
        let previous = self.inner.feedback_limits.load_full();
        let feedback_limits = feedback_limits(&directory, previous.rate(), Some(&previous))?;
        self.inner.in_flight.retain(directory.clients());
        let ids: Vec<_> = directory.clients().iter().map(|c| c.id.clone()).collect();
        self.inner.quota_board.retain(&ids);
        // Policies first: a request that sees the new clients finds their policies too.
        self.inner.policies.store(policies);
        self.inner.feedback_limits.store(feedback_limits);
        self.inner.clients.store(Arc::new(directory));
        Ok(())
    }

    /// Replaces the feedback rate (a configuration reload); the clients' buckets start
    /// full at the new rate only when it changed.
    pub fn replace_feedback_rate(&self, rate: FeedbackRate) -> Result<(), ApiConfigError> {
        let previous = self.inner.feedback_limits.load_full();
        let directory = self.inner.clients.load_full();
        let limits = feedback_limits(&directory, rate, Some(&previous))?;
        self.inner.feedback_limits.store(limits);
        Ok(())
    }

    pub(crate) fn feedback_limits(&self) -> Arc<FeedbackLimits> {
        self.inner.feedback_limits.load_full()
    }

    pub(crate) fn policies(&self) -> Arc<ClientPolicies> {
        self.inner.policies.load_full()
    }

    pub(crate) fn ui_sessions(&self) -> &SessionTable {
        &self.inner.ui_sessions
    }

    pub(crate) fn sign_in_guard(&self) -> &SignInGuard {
        &self.inner.sign_in_guard
    }

    pub(crate) fn secure_cookies(&self) -> bool {
        self.inner.secure_cookies
    }

    pub(crate) fn quota_board(&self) -> &QuotaBoard {
        &self.inner.quota_board
    }

    pub(crate) fn in_flight(&self) -> &InFlight {
        &self.inner.in_flight
    }

    pub(crate) fn key_turns(&self) -> &KeyTurns {
        &self.inner.key_turns
    }

    /// Replaces the extraction settings (a configuration reload).
    pub fn replace_extraction(&self, settings: ExtractionSettings) -> Result<(), ApiConfigError> {
        crate::config::first_problem(settings.problems())?;
        self.inner.extraction.store(Arc::new(settings));
        Ok(())
    }

    /// Replaces the cooldown policy (a configuration reload).
    pub fn replace_cooldowns(&self, policy: CooldownPolicy) {
        self.inner.cooldowns.store(Arc::new(policy));
    }

    pub(crate) fn cooldown_policy(&self) -> CooldownPolicy {
        **self.inner.cooldowns.load()
    }

    /// Replaces the `/metrics` token (a configuration reload).
    pub fn replace_metrics_token(&self, token: Option<SecretHash>) {
        self.inner.metrics_token.store(token.map(Arc::new));
    }

    pub(crate) fn metrics_token(&self) -> Option<Arc<SecretHash>> {
        self.inner.metrics_token.load_full()
    }

    pub(crate) fn client_metrics_open(&self) -> bool {
        self.inner.client_metrics_open
    }

    pub(crate) fn trusted_proxies(&self) -> &[(std::net::IpAddr, u8)] {
        &self.inner.trusted_proxies
    }

    pub(crate) fn reloader(&self) -> Option<&Arc<dyn ConfigReloader>> {
        self.inner.reloader.as_ref()
    }

    pub(crate) fn ports(&self) -> &ApiPorts {
        &self.inner.ports
    }

    pub(crate) fn clients(&self) -> Arc<ClientDirectory> {
        self.inner.clients.load_full()
    }

    pub(crate) fn shield(&self) -> &Shield {
        &self.inner.shield
    }

    pub fn limits(&self) -> &ApiLimits {
        &self.inner.limits
    }

    pub fn extraction(&self) -> Arc<ExtractionSettings> {
        self.inner.extraction.load_full()
    }

    pub(crate) fn concurrency(&self) -> Arc<Semaphore> {
        self.inner.concurrency.clone()
    }

    pub(crate) fn address_slots(&self) -> &Arc<AddressSlots> {
        &self.inner.address_slots
    }

    pub(crate) fn metrics_handle(&self) -> Option<&MetricsHandle> {
        self.inner.metrics.as_ref()
    }

    pub(crate) fn ownership_wake(&self) -> Option<&Arc<dyn OwnershipWake>> {
        self.inner.ownership_wake.as_ref()
    }

    pub(crate) fn now(&self) -> UnixMillis {
        (self.inner.clock)()
    }

    /// Whether a gateway's feedback ticket is good now for `subject` (a client on a proxy
    /// in its current lease generation: `crate::ticket_key`).
    pub(crate) async fn ticket_verifies(
        &self,
        ticket: &str,
        subject: proxypool_core::ticket::TicketSubject<'_>,
    ) -> proxypool_core::PoolResult<bool> {
        self.inner
            .ticket_key
            .verifies(&*self.inner.ports.tickets, self.now(), ticket, subject)
            .await
    }

    pub(crate) fn readiness(&self) -> &Arc<ReadinessCache> {
        &self.inner.readiness
    }

    /// `Retry-After` for the API's own 503 answers.
    pub(crate) fn retry_after(&self) -> u64 {
        self.inner.limits.unavailable_retry_after.as_secs_ceil()
    }
}

fn feedback_limits(
    clients: &ClientDirectory,
    rate: FeedbackRate,
    previous: Option<&Arc<FeedbackLimits>>,
) -> Result<Arc<FeedbackLimits>, ApiConfigError> {
    FeedbackLimits::build(clients.clients(), rate, previous)
        .map_err(|error| ApiConfigError::ClientPolicy(error.to_string()))
}

fn client_policies(
    clients: &ClientDirectory,
    previous: Option<&Arc<ClientPolicies>>,
) -> Result<Arc<ClientPolicies>, ApiConfigError> {
    ClientPolicies::build(clients.clients(), previous)
        .map_err(|error| ApiConfigError::ClientPolicy(error.to_string()))
}
