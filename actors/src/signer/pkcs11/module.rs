//! The PKCS#11 modules of this process: each library is loaded and
//! `C_Initialize`d once (with `CKF_OS_LOCKING_OK`: the module may be called
//! from several threads at once) and shared by every signer that names it.
//! A module is finalised only to be initialised again when a token went
//! missing ([`Module::reinitialize`]); the process's exit releases it.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, OnceLock, RwLock, RwLockReadGuard,
    },
    time::{Duration, Instant},
};

use cryptoki::{
    context::{CInitializeArgs, CInitializeFlags, Pkcs11},
    error::{Error, RvError},
};

use super::pool::Pool;
use crate::signer::SignerError;

/// How often a module may be re-initialised at most (see
/// [`Module::reinitialize`]).
const REINIT_INTERVAL: Duration = Duration::from_secs(5);

/// One loaded, initialised module and what guards its re-initialisation.
pub(super) struct Module {
    /// The module's functions.
    pub(super) context: Pkcs11,
    path: PathBuf,
    /// Held shared by every call into the module; a re-initialisation
    /// takes it alone, so no call runs across `C_Finalize`.
    calls: RwLock<()>,
    /// Bumped by every re-initialisation: sessions of an older generation
    /// are abandoned, never used or closed (their handles may be reused).
    generation: AtomicU64,
    last_reinit: Mutex<Option<Instant>>,
    /// The module's logged-in sessions, shared by every key on it.
    pub(super) pool: Pool<cryptoki::session::Session>,
}

impl Module {
    /// A shared hold on the module for a call, and its generation now.
    pub(super) fn enter(&self) -> (RwLockReadGuard<'_, ()>, u64) {
        let guard = self.calls.read().unwrap_or_else(|p| p.into_inner());
        (guard, self.generation.load(Ordering::Acquire))
    }

    /// The generation now (see [`Module::enter`]).
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// `C_Finalize` then `C_Initialize` again, at most once per
    /// [`REINIT_INTERVAL`]: some modules see a token that left and came back
    /// only then (SoftHSM2 reads its token directory in `C_Initialize`).
    /// Every session of every signer on the module is abandoned; they open
    /// new ones.
    pub(super) fn reinitialize(&self) -> Result<(), SignerError> {
        let mut last = self.last_reinit.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| at.elapsed() < REINIT_INTERVAL) {
            return Ok(());
        }
        *last = Some(Instant::now());
        let _alone = self.calls.write().unwrap_or_else(|p| p.into_inner());
        // Not initialised any more is as good as finalised.
        let _ = self.context.clone().finalize();
        self.generation.fetch_add(1, Ordering::AcqRel);
        // Closed by C_Finalize with every other session of the process.
        self.pool.abandon_idle();
        // A module that cannot start now (its token store gone) is tried
        // again at the next call: every call meanwhile fails as
        // `CryptokiNotInitialized`, which is transient.
        initialize(&self.context, &self.path).map_err(|e| match e {
            SignerError::Config(message) => SignerError::Unavailable(message),
            other => other,
        })?;
        tracing::info!(
            target: crate::signer::TARGET,
            module = %self.path.display(),
            "PKCS#11 module initialised again (a token was missing)"
        );
        Ok(())
    }
}

/// `C_Initialize` with `CKF_OS_LOCKING_OK`; already initialised is fine.
fn initialize(context: &Pkcs11, path: &Path) -> Result<(), SignerError> {
    match context.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(Error::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => Ok(()),
        Err(e) => Err(SignerError::Config(format!(
            "PKCS#11 module {}: C_Initialize: {}",
            path.display(),
            describe(&e)
        ))),
    }
}

/// The loaded modules, by the path the configuration gives.
fn loaded() -> &'static Mutex<HashMap<PathBuf, Arc<Module>>> {
    static MODULES: OnceLock<Mutex<HashMap<PathBuf, Arc<Module>>>> = OnceLock::new();
    MODULES.get_or_init(Mutex::default)
}

/// The module at `path`, loaded and initialised on first use with a pool
/// of at most `max_sessions` sessions. Every signer on one module must ask
/// the same bound (`txmgr config check` says so too): the first one sets
/// it for the life of the process.
pub(super) fn module(path: &Path, max_sessions: usize) -> Result<Arc<Module>, SignerError> {
    // A poisoned lock only means another thread panicked while loading:
    // the map itself is still consistent.
    let mut modules = loaded()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(module) = modules.get(path) {
        if module.pool.max() != max_sessions.max(1) {
            return Err(SignerError::Config(format!(
                "PKCS#11 module {} is open with max_sessions = {}; this signer asks {}: \
                 give every signer on one module the same max_sessions (a restart applies a change)",
                path.display(),
                module.pool.max(),
                max_sessions
            )));
        }
        return Ok(module.clone());
    }
    let context = Pkcs11::new(path).map_err(|e| {
        SignerError::Config(format!(
            "PKCS#11 module {}: cannot load: {e}",
            path.display()
        ))
    })?;
    initialize(&context, path)?;
    let module = Arc::new(Module {
        context,
        path: path.to_owned(),
        calls: RwLock::new(()),
        generation: AtomicU64::new(0),
        last_reinit: Mutex::new(None),
        pool: Pool::new(
            max_sessions,
            path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
        ),
    });
    modules.insert(path.to_owned(), module.clone());
    Ok(module)
}

/// A module error in a few words: the return value's name (`PinIncorrect`,
/// `TokenNotPresent`) and the function, not the specification's paragraph.
pub(super) fn describe(error: &Error) -> String {
    match error {
        Error::Pkcs11(rv, function) => format!("{function:?}: {rv:?}"),
        other => other.to_string(),
    }
}

/// Whether `error` says the token or the session went away (removed,
/// reset, unplugged) or the module is busy: the same request may succeed
/// once it is back, on a new session.
pub(super) fn is_transient(error: &Error) -> bool {
    matches!(
        error,
        Error::Pkcs11(
            RvError::DeviceRemoved
                | RvError::DeviceError
                | RvError::DeviceMemory
                | RvError::TokenNotPresent
                | RvError::TokenNotRecognized
                | RvError::SessionHandleInvalid
                | RvError::SessionClosed
                | RvError::SessionCount
                | RvError::FunctionFailed
                | RvError::GeneralError
                | RvError::UserNotLoggedIn
                | RvError::KeyHandleInvalid
                | RvError::ObjectHandleInvalid
                | RvError::CryptokiNotInitialized,
            _
        )
    )
}
