//! One key of one token, as every call into the module sees it: sessions
//! come from the module's pool ([`super::pool`]), the key's handle is
//! looked up once per session, and faults are sorted into transient
//! (`Unavailable`: the intent waits) and refusals.

use std::{sync::Arc, time::Duration};

use alloy::primitives::Address;
use cryptoki::{
    error::{Error, RvError},
    object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle},
    session::{Session, UserType},
    types::AuthPin,
};

use super::{
    ecdsa,
    module::{self, Module},
    pool::{self, Taken},
    Pkcs11Key,
};
use crate::signer::SignerError;

/// A pooled `cryptoki` session.
type Pooled = pool::Pooled<Session>;

/// Attempts of one call: a dead idle session is replaced once, and a
/// re-initialisation of the module between checkout and call is retried.
const ATTEMPTS: usize = 3;

/// Why a call on a session did not give its value.
enum Failure {
    /// The module answered an error.
    Module(Error),
    /// The module works but the request cannot succeed (no such key).
    Refusal(SignerError),
}

/// What every call for one key needs, shared with the blocking pool.
pub(super) struct Token {
    module: Arc<Module>,
    key: Pkcs11Key,
    pin: AuthPin,
    /// [`Pkcs11Key::name`], the key's name in messages and in the
    /// sessions' handle caches.
    name: String,
}

impl Token {
    /// The key `key` of the loaded `module`, logged in with `pin`.
    pub(super) fn new(module: Arc<Module>, key: Pkcs11Key, pin: AuthPin) -> Self {
        let name = key.name();
        Self {
            module,
            key,
            pin,
            name,
        }
    }

    /// Where the key is.
    pub(super) fn key(&self) -> &Pkcs11Key {
        &self.key
    }

    /// `token "hot" key "submitter-1"`.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Runs `call` on the blocking pool once the module's pool grants a
    /// permit, waiting `timeout` at most for both: a module that hangs
    /// (every session held by a call that does not return) makes the
    /// intent wait as `Unavailable`, never its actor. A call that overruns
    /// goes on and keeps its permit until the module answers, so the
    /// sessions in use stay within `max_sessions`.
    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        timeout: Duration,
        call: impl FnOnce() -> Result<T, SignerError> + Send + 'static,
    ) -> Result<T, SignerError> {
        let running = async {
            let permit = self.module.pool.permit().await;
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                call()
            })
            .await
        };
        tokio::time::timeout(timeout, running)
            .await
            .map_err(|_| {
                SignerError::Unavailable(format!(
                    "PKCS#11 {}: no session free or no answer within {timeout:?}",
                    self.name
                ))
            })?
            .map_err(|e| SignerError::Unavailable(format!("PKCS#11 task: {e}")))?
    }

    /// Runs `call` with a logged-in session of the token and the private
    /// key's handle in it, then gives the session back to the pool. An
    /// idle session the module dropped meanwhile is replaced by a new one
    /// (once); a transient fault closes the token's idle sessions. For a
    /// holder of the module's permit ([`Token::blocking`]).
    pub(super) fn with_session<T>(
        &self,
        doing: &str,
        mut call: impl FnMut(&Session, ObjectHandle) -> Result<T, Error>,
    ) -> Result<T, SignerError> {
        let pool = &self.module.pool;
        for _ in 0..ATTEMPTS {
            let (mut pooled, was_idle) = self.checkout()?;
            let (entered, generation) = self.module.enter();
            if generation != pooled.generation {
                // Initialised again since the session was opened: it is
                // gone with the old generation.
                drop(entered);
                pool.forget();
                continue;
            }
            let result = self
                .key_in(&mut pooled)
                .and_then(|key| call(&pooled.session, key).map_err(Failure::Module));
            drop(entered);
            match result {
                Ok(value) => {
                    pool.put(pooled, generation);
                    return Ok(value);
                }
                Err(Failure::Refusal(error)) => {
                    pool.put(pooled, generation);
                    return Err(error);
                }
                Err(Failure::Module(error)) => {
                    self.close(pooled);
                    if !module::is_transient(&error) {
                        return Err(self.fault(doing, &error));
                    }
                    // The token dropped its sessions, or went away: the
                    // other idle ones are as dead.
                    for dead in pool.drain_token(&self.key.token_label) {
                        self.close_session(dead);
                    }
                    if !was_idle {
                        return Err(self.fault(doing, &error));
                    }
                }
            }
        }
        Err(SignerError::Unavailable(format!(
            "PKCS#11 {}: the module was initialised again while {doing}; tried {ATTEMPTS} times",
            self.name
        )))
    }

    /// An idle session of the token from the pool, or a new one (`true`
    /// when it was idle: it may have died meanwhile).
    fn checkout(&self) -> Result<(Pooled, bool), SignerError> {
        let pool = &self.module.pool;
        match pool.take(&self.key.token_label, self.module.generation()) {
            Taken::Idle(pooled) => Ok((pooled, true)),
            Taken::Room { evicted } => {
                if let Some(evicted) = evicted {
                    self.close_session(evicted);
                }
                match self.open() {
                    Ok(pooled) => Ok((pooled, false)),
                    Err(error) => {
                        pool.forget();
                        Err(error)
                    }
                }
            }
        }
    }

    /// A new logged-in session on the token. When the token is not there,
    /// the module is initialised again once (rate-limited) and looked at
    /// anew: a token that came back is seen.
    fn open(&self) -> Result<Pooled, SignerError> {
        match self.open_in_generation() {
            Err(SignerError::Unavailable(_)) => {
                self.module.reinitialize()?;
                self.open_in_generation()
            }
            other => other,
        }
    }

    /// [`Token::open`] in the module's current generation.
    fn open_in_generation(&self) -> Result<Pooled, SignerError> {
        let (_call, generation) = self.module.enter();
        let module = &self.module.context;
        let slots = module
            .get_slots_with_token()
            .map_err(|e| self.fault("listing slots", &e))?;
        let slot = slots
            .into_iter()
            .find(|slot| {
                module
                    .get_token_info(*slot)
                    .is_ok_and(|info| info.label().trim_end() == self.key.token_label)
            })
            .ok_or_else(|| {
                SignerError::Unavailable(format!(
                    "PKCS#11 {}: no token with this label is present",
                    self.name
                ))
            })?;
        let session = module
            .open_ro_session_no_drop(slot)
            .map_err(|e| self.fault("opening a session", &e))?;
        let refused = match session.login(UserType::User, Some(&self.pin)) {
            // Login is per token and process: another session did it.
            Ok(()) | Err(Error::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => None,
            Err(Error::Pkcs11(
                rv @ (RvError::PinIncorrect
                | RvError::PinLocked
                | RvError::PinExpired
                | RvError::PinInvalid
                | RvError::PinLenRange),
                _,
            )) => Some(SignerError::Config(format!(
                "PKCS#11 {}: the token refused the PIN ({rv:?})",
                self.name
            ))),
            Err(e) => Some(self.fault("logging in", &e)),
        };
        match refused {
            None => Ok(Pooled {
                token_label: self.key.token_label.clone(),
                session,
                generation,
                keys: Default::default(),
            }),
            Some(error) => {
                let _ = session.close();
                Err(error)
            }
        }
    }

    /// The private key's handle in `pooled` (found once per session).
    fn key_in(&self, pooled: &mut Pooled) -> Result<ObjectHandle, Failure> {
        if let Some(key) = pooled.keys.get(&self.name) {
            return Ok(*key);
        }
        let keys = pooled
            .session
            .find_objects(&self.template(ObjectClass::PRIVATE_KEY))
            .map_err(Failure::Module)?;
        match keys[..] {
            [key] => {
                pooled.keys.insert(self.name.clone(), key);
                Ok(key)
            }
            [] => Err(Failure::Refusal(SignerError::Config(format!(
                "PKCS#11 {}: no EC private key with this label/id on the token \
                 (`pkcs11-tool --list-objects --login` lists them)",
                self.name
            )))),
            _ => Err(Failure::Refusal(SignerError::Config(format!(
                "PKCS#11 {}: {} EC private keys match; name the key by key_id too",
                self.name,
                keys.len()
            )))),
        }
    }

    /// The address of the key's public point (its public key object's
    /// `CKA_EC_POINT`), after checking the curve is secp256k1. Checks the
    /// private key is there too. For a permit holder.
    pub(super) fn address(&self) -> Result<Address, SignerError> {
        let template = self.template(ObjectClass::PUBLIC_KEY);
        let publics = self.with_session("reading the public key", |session, _| {
            session
                .find_objects(&template)?
                .into_iter()
                .map(|public| {
                    session
                        .get_attributes(public, &[AttributeType::EcParams, AttributeType::EcPoint])
                })
                .collect::<Result<Vec<_>, _>>()
        })?;
        let name = &self.name;
        let [attributes] = &publics[..] else {
            return Err(SignerError::Config(format!(
                "PKCS#11 {name}: {} EC public keys match (one is needed to derive the address)",
                publics.len()
            )));
        };
        let mut params = None;
        let mut point = None;
        for attribute in attributes {
            match attribute {
                Attribute::EcParams(value) => params = Some(value),
                Attribute::EcPoint(value) => point = Some(value),
                _ => {}
            }
        }
        if params.map(Vec::as_slice) != Some(&ecdsa::SECP256K1_PARAMS[..]) {
            return Err(SignerError::Config(format!(
                "PKCS#11 {name}: the key is not on secp256k1 (CKA_EC_PARAMS {}); \
                 Ethereum keys are made with `--key-type EC:secp256k1`",
                params.map_or_else(|| "absent".to_owned(), alloy::hex::encode)
            )));
        }
        let point = point
            .and_then(|point| ecdsa::uncompressed_point(point))
            .ok_or_else(|| {
                SignerError::Config(format!(
                    "PKCS#11 {name}: CKA_EC_POINT is not an uncompressed point"
                ))
            })?;
        Ok(ecdsa::address_of(&point))
    }

    /// The template that selects the key's object of `class`.
    fn template(&self, class: ObjectClass) -> Vec<Attribute> {
        let mut template = vec![Attribute::Class(class), Attribute::KeyType(KeyType::EC)];
        if let Some(label) = &self.key.key_label {
            template.push(Attribute::Label(label.as_bytes().to_vec()));
        }
        if let Some(id) = &self.key.key_id {
            template.push(Attribute::Id(id.clone()));
        }
        template
    }

    /// Closes `pooled` and counts it out of the pool.
    fn close(&self, pooled: Pooled) {
        self.close_session(pooled);
        self.module.pool.forget();
    }

    /// Closes `pooled`'s session if it belongs to the module's current
    /// generation (an older one's handle may name another session now).
    /// The pool's count is the caller's.
    fn close_session(&self, pooled: Pooled) {
        let (_call, generation) = self.module.enter();
        if pooled.generation == generation {
            let _ = pooled.session.close();
        }
    }

    /// A module error as a signer error: transient faults (token gone,
    /// device error) are `Unavailable`, the rest `Refused`.
    fn fault(&self, doing: &str, error: &Error) -> SignerError {
        let message = format!(
            "PKCS#11 {} ({doing}): {}",
            self.name,
            module::describe(error)
        );
        if module::is_transient(error) {
            SignerError::Unavailable(message)
        } else {
            SignerError::Refused(message)
        }
    }
}
