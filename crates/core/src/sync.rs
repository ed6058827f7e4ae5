//! The workspace's one policy for poisoned `std::sync` locks: recover and carry on.
//!
//! A lock is poisoned when a thread panicked while holding it. Every lock in these crates
//! guards data that a critical section leaves consistent at each step (a map insert, a
//! counter, a cached `Option`), held briefly and never across an `.await`, so the data
//! behind a poisoned lock is still valid: the panic is reported where it happened, and
//! turning it into a second panic in every later caller (`lock().unwrap()`) would only
//! spread one failure through the whole process. Hence [`LockExt::lock_or_recover`] and its
//! `RwLock` siblings.
//!
//! A lock whose critical section spans a multi-step update that a panic could leave half
//! done must not use this helper; it says at the spot why and what it does instead (the
//! in-memory pool is the one such lock). The crates that deliberately depend on nothing of
//! ours (throttle, sim, testkit), and the quota, which takes only core's port types, apply
//! the same policy inline with `unwrap_or_else(PoisonError::into_inner)`.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locking that recovers from poisoning (see the module docs for why that is sound here).
pub trait LockExt<T: ?Sized> {
    /// Locks, taking the guard back from a poisoned lock.
    fn lock_or_recover(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`LockExt`] for reader-writer locks.
pub trait RwLockExt<T: ?Sized> {
    /// A shared guard, taken back from a poisoned lock.
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T>;
    /// An exclusive guard, taken back from a poisoned lock.
    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_poisoned_mutex_still_hands_out_its_data() {
        let lock = Arc::new(Mutex::new(1));
        let poisoner = Arc::clone(&lock);
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.lock_or_recover();
            panic!("poison the lock");
        })
        .join();
        assert!(lock.is_poisoned());
        *lock.lock_or_recover() += 1;
        assert_eq!(*lock.lock_or_recover(), 2);
    }

    #[test]
    fn a_poisoned_rwlock_still_hands_out_its_data() {
        let lock = Arc::new(RwLock::new(1));
        let poisoner = Arc::clone(&lock);
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.write_or_recover();
            panic!("poison the lock");
        })
        .join();
        *lock.write_or_recover() += 1;
        assert_eq!(*lock.read_or_recover(), 2);
    }
}
