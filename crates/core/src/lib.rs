//! proxypool-core: the domain model and the ports every other crate speaks.
//!
//! Module map:
//! - [`address_block`]: CIDR blocks ([`IpNet`]) and whether an address lies in one; the
//!   one rule of addresses that are never a vendor's public proxy.
//! - [`http_head`]: the smallest request-head cap an HTTP listener can enforce.
//! - [`ids`]: validated identifiers (upstream, worker, client, proxy, extraction, labels).
//! - [`secret`]: passwords that cannot be printed by accident.
//! - [`proxy`]: the proxy record, protocols, statuses and the stable proxy id.
//! - [`upsert`]: vendor batches and the shared batch validation.
//! - [`health`]: check results and the status rule.
//! - [`extract`]: extraction requests, responses, filters and the request digest.
//! - [`ownership`]: worker leases fenced by a global epoch.
//! - [`runtime`]: worker sessions, snapshot references and runtime reports.
//! - [`lease`]: named leader leases with fencing tokens (one active controller), and the
//!   [`Fence`] a leader's writes carry.
//! - [`inventory`]: inventory views and maintenance reports.
//! - [`listing`]: the read-only, bounded listing of proxies for operators.
//! - [`admin`]: operator state shared by every controller (worker modes, provider status).
//! - [`ports`]: the async port traits the adapters implement.
//! - [`port_set`]: destination ports a gateway client may reach (`"*"` or a list).
//! - [`cooldown`]: cooldowns per (proxy, registrable domain) and client feedback;
//!   [`cooldown_merge`]: the merge every store runs on them.
//! - [`control`]: the worker control API messages (gateway ⇄ controller).
//! - [`store_loss`]: why a pool store is not the one remembered ([`LossReason`]).
//! - [`store_mark`]: the pool store's identity and generation, losses and the recovery rule,
//!   and the durable ledger that remembers them.
//! - [`secret_hash`]: salted hashes of tokens and gateway passwords, and the constant-time
//!   compare.
//! - [`random`]: the operating system's CSPRNG: bytes, tokens over an alphabet, numbers.
//! - [`error`]: the one error type of the ports.
//! - [`time`]: explicit milliseconds since the epoch.
//! - [`clock`]: the injectable wall and monotonic clock ([`SystemClock`], [`ManualClock`]).
//! - [`sync`]: the poisoned-lock policy ([`LockExt`]).
//! - [`usage`]: usage per (client, upstream): gateway counters, deltas, stored buckets.
//! - [`ticket`]: feedback tickets, a gateway's signed proof that it routed a client
//!   through a proxy (HMAC-SHA256 under the store's [`TicketKey`]).
//!
//! This crate depends on nothing else of ours.

pub mod address_block;
pub mod admin;
pub mod clock;
pub mod control;
pub mod cooldown;
pub mod cooldown_merge;
pub mod error;
pub mod extract;
pub mod fleet;
pub mod geo;
pub mod health;
pub mod hex;
pub mod http_head;
pub mod ids;
pub mod inventory;
pub mod lease;
pub mod listing;
pub mod ownership;
pub mod port_set;
pub mod ports;
pub mod proxy;
pub mod random;
pub mod runtime;
pub mod secret;
pub mod secret_hash;
pub mod store_loss;
pub mod store_mark;
pub mod sync;
pub mod ticket;
pub mod time;
pub mod upsert;
pub mod usage;

pub use address_block::{
    IpNet, address_group, block_contains, canonical_block, dial_address, dial_ip, in_any_block,
    in_block, is_internal_address,
};
pub use admin::{
    AdminStore, KeyedCall, KeyedModeSet, ProviderStatus, WorkerMode, WorkerModeRecord,
};
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use cooldown::{
    CooldownChange, CooldownKey, CooldownPolicy, CooldownReport, CooldownStore, Domain,
    DomainCooldown, ReturnOutcome, SessionFeedback, Verdict,
};
pub use error::{Conflict, PoolError, PoolResult, Unavailable};
pub use extract::{
    ExtractMode, ExtractOutcome, ExtractRequest, ExtractResponse, ExtractedProxy, ProxyFilter,
};
pub use geo::{GeoLabel, GeoValues};
pub use health::{
    CheckFailure, CheckOutcome, DueQuery, HealthBatch, HealthObservation, HealthReport,
};
pub use http_head::MIN_HEADER_BYTES;
pub use ids::{ClientId, ExtractionId, Label, ProjectId, ProxyId, UpstreamId, WorkerId};
pub use inventory::{Footprint, InventoryView, SweepReport};
pub use lease::{Fence, Lease, LeaseStore, next_token};
pub use listing::{ListedProxy, MAX_LIST_LIMIT, ProxyListFilter, ProxyPage};
pub use ownership::{Assignment, AssignmentState, OwnedProxy};
pub use port_set::PortSet;
pub use ports::{
    ActivityPool, Extractor, Fencing, HealthStore, InventoryReader, Maintenance,
    OwnershipRepository, ProxyLister, TicketKeyStore, Upserter, UsageReader, WorkerRuntimeStore,
};
pub use proxy::{Health, Protocol, ProxyRecord, ProxyStatus, proxy_id_for};
pub use runtime::{
    Holding, ProxyRuntime, ReportOutcome, ReportReceipt, RuntimeReport, SNAPSHOT_JOURNAL_CAP,
    SnapshotChanges, SnapshotRef, SnapshotVersion, StoredRuntime, WorkerSession,
};
pub use secret::{Credentials, Secret};
pub use secret_hash::SecretHash;
pub use store_mark::{
    Expectation, LedgerEntry, LossReason, Recovery, StoreIdentity, StoreLedger, StoreMark,
    StoreStatus,
};
pub use sync::{LockExt, RwLockExt};
pub use ticket::{
    Reporter, TICKET_LIFETIME_MS, TicketError, TicketKey, TicketSigner, issue_ticket, verify_ticket,
};
pub use time::{UnixMillis, now_millis};
pub use upsert::{Candidate, DropReason, FetchedBatch, PreparedBatch, UpsertReport, prepare_batch};
