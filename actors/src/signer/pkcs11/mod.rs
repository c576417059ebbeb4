//! A signer whose key never leaves a hardware security module, reached
//! through the vendor's PKCS#11 library (README "Keys in an HSM").
//!
//! ```text
//! connect: load + C_Initialize the module once per process ─► token by label
//!          ─► session + C_Login(user) ─► private key by label/id
//!          ─► public key's CKA_EC_PARAMS (secp256k1?) and CKA_EC_POINT ─► address
//! sign:    bind chain id ─► permit (≤ max_sessions) ─► an idle logged-in session
//!          (or a new one) ─► C_Sign(CKM_ECDSA, hash) on the blocking pool
//!          ─► r ‖ s, low s, recovery id found by recovery ─► recovered == address?
//! ```
//!
//! A module or token fault (token removed, device error, a session the
//! module closed) is [`SignerError::Unavailable`]: the idle sessions are
//! dropped, the intent waits and is signed again later with the same nonce,
//! on a new session. A PIN the token refuses is [`SignerError::Config`]. The
//! PIN is never logged, shown or put in an error.

use std::{
    fmt,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use alloy::{
    consensus::{SignableTransaction, TxEnvelope, TypedTransaction},
    eips::eip2718::Encodable2718,
    primitives::{keccak256, Address, B256},
};
use async_trait::async_trait;
use cryptoki::{
    error::{Error, RvError},
    mechanism::Mechanism,
    object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle},
    session::{Session, UserType},
    types::AuthPin,
};
use tokio::sync::Semaphore;

use super::{bind_chain_id, SignedRaw, SignerError, TxSigner};

mod ecdsa;
mod module;

/// Where the key is: the module, the token and the key's label or id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pkcs11Key {
    /// Path of the PKCS#11 library.
    pub module: PathBuf,
    /// Label of the token.
    pub token_label: String,
    /// `CKA_LABEL` of the key's objects.
    pub key_label: Option<String>,
    /// `CKA_ID` of the key's objects.
    pub key_id: Option<Vec<u8>>,
}

impl Pkcs11Key {
    /// `token "hot" key "submitter-1"`, for messages.
    fn name(&self) -> String {
        let mut name = format!("token {:?}", self.token_label);
        if let Some(label) = &self.key_label {
            name.push_str(&format!(" key {label:?}"));
        }
        if let Some(id) = &self.key_id {
            name.push_str(&format!(" key id {}", alloy::hex::encode(id)));
        }
        name
    }

    /// The template that selects the key's object of `class`.
    fn template(&self, class: ObjectClass) -> Vec<Attribute> {
        let mut template = vec![Attribute::Class(class), Attribute::KeyType(KeyType::EC)];
        if let Some(label) = &self.key_label {
            template.push(Attribute::Label(label.as_bytes().to_vec()));
        }
        if let Some(id) = &self.key_id {
            template.push(Attribute::Id(id.clone()));
        }
        template
    }
}

/// A logged-in session and the private key's handle in it, of one
/// generation of the module (opened without close-on-drop: a session of an
/// older generation is abandoned, never closed, since its handle may now
/// name another signer's session).
struct Ready {
    session: Session,
    key: ObjectHandle,
    generation: u64,
}

/// What every signing call needs, shared with the blocking pool.
struct Token {
    module: Arc<module::Module>,
    key: Pkcs11Key,
    pin: AuthPin,
}

/// A signer for one submitter backed by one key of one token.
pub struct Pkcs11TxSigner {
    token: Arc<Token>,
    address: Address,
    chain_id: u64,
    /// Logged-in sessions not signing right now.
    idle: Arc<Mutex<Vec<Ready>>>,
    /// Sessions signing at once, at most (`max_sessions`).
    permits: Arc<Semaphore>,
    /// How long a signature may take before the intent waits (the call
    /// itself goes on and keeps its permit until the module answers).
    timeout: Duration,
}

impl Pkcs11TxSigner {
    /// Loads the module (once per process), finds the token and the key,
    /// logs in and derives the key's address from its public point. Every
    /// call to the module is bounded by `timeout` (`chain.rpc_timeout`).
    pub async fn connect(
        key: Pkcs11Key,
        pin: AuthPin,
        chain_id: u64,
        max_sessions: usize,
        timeout: Duration,
    ) -> Result<Self, SignerError> {
        let token = Arc::new(Token {
            module: module::module(&key.module)?,
            key,
            pin,
        });
        let opened = token.clone();
        let name = token.key.name();
        let connecting = tokio::task::spawn_blocking(move || {
            let ready = opened.open()?;
            let address = {
                let (_call, _) = opened.module.enter();
                opened.address(&ready.session)
            };
            match address {
                Ok(address) => Ok((ready, address)),
                Err(e) => {
                    opened.close(ready);
                    Err(e)
                }
            }
        });
        let (ready, address) = tokio::time::timeout(timeout, connecting)
            .await
            .map_err(|_| no_answer(&name, timeout))?
            .map_err(|e| SignerError::Unavailable(format!("PKCS#11 task: {e}")))??;
        Ok(Self {
            token,
            address,
            chain_id,
            idle: Arc::new(Mutex::new(vec![ready])),
            permits: Arc::new(Semaphore::new(max_sessions.max(1))),
            timeout,
        })
    }
}

impl Token {
    /// A new logged-in session on the token and the private key's handle.
    /// When the token is not there, the module is initialised again once
    /// (rate-limited) and looked at anew: a token that came back is seen.
    fn open(&self) -> Result<Ready, SignerError> {
        match self.open_in_generation() {
            Err(SignerError::Unavailable(_)) => {
                self.module.reinitialize()?;
                self.open_in_generation()
            }
            other => other,
        }
    }

    /// [`Token::open`] in the module's current generation.
    fn open_in_generation(&self) -> Result<Ready, SignerError> {
        let (_call, generation) = self.module.enter();
        let module = &self.module.context;
        let fault = |what: &str, e: &Error| self.fault(what, e);
        let slots = module
            .get_slots_with_token()
            .map_err(|e| fault("listing slots", &e))?;
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
                    self.key.name()
                ))
            })?;
        let session = module
            .open_ro_session_no_drop(slot)
            .map_err(|e| fault("opening a session", &e))?;
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
                self.key.name()
            ))),
            Err(e) => Some(fault("logging in", &e)),
        };
        let found = match refused {
            Some(error) => Err(error),
            None => session
                .find_objects(&self.key.template(ObjectClass::PRIVATE_KEY))
                .map_err(|e| fault("finding the private key", &e)),
        };
        let error = match found {
            Ok(keys) => match keys[..] {
                [key] => {
                    return Ok(Ready {
                        session,
                        key,
                        generation,
                    })
                }
                [] => SignerError::Config(format!(
                    "PKCS#11 {}: no EC private key with this label/id on the token \
                     (`pkcs11-tool --list-objects --login` lists them)",
                    self.key.name()
                )),
                _ => SignerError::Config(format!(
                    "PKCS#11 {}: {} EC private keys match; name the key by key_id too",
                    self.key.name(),
                    keys.len()
                )),
            },
            Err(error) => error,
        };
        let _ = session.close();
        Err(error)
    }

    /// The address of the key's public point (its public key object's
    /// `CKA_EC_POINT`), after checking the curve is secp256k1.
    fn address(&self, session: &Session) -> Result<Address, SignerError> {
        let name = self.key.name();
        let publics = session
            .find_objects(&self.key.template(ObjectClass::PUBLIC_KEY))
            .map_err(|e| self.fault("finding the public key", &e))?;
        let [public] = publics[..] else {
            return Err(SignerError::Config(format!(
                "PKCS#11 {name}: {} EC public keys match (one is needed to derive the address)",
                publics.len()
            )));
        };
        let attributes = session
            .get_attributes(public, &[AttributeType::EcParams, AttributeType::EcPoint])
            .map_err(|e| self.fault("reading the public key", &e))?;
        let mut params = None;
        let mut point = None;
        for attribute in attributes {
            match attribute {
                Attribute::EcParams(value) => params = Some(value),
                Attribute::EcPoint(value) => point = Some(value),
                _ => {}
            }
        }
        if params.as_deref() != Some(&ecdsa::SECP256K1_PARAMS[..]) {
            return Err(SignerError::Config(format!(
                "PKCS#11 {name}: the key is not on secp256k1 (CKA_EC_PARAMS {}); \
                 Ethereum keys are made with `--key-type EC:secp256k1`",
                params.map_or_else(|| "absent".to_owned(), alloy::hex::encode)
            )));
        }
        let point = point
            .as_deref()
            .and_then(ecdsa::uncompressed_point)
            .ok_or_else(|| {
                SignerError::Config(format!(
                    "PKCS#11 {name}: CKA_EC_POINT is not an uncompressed point"
                ))
            })?;
        Ok(ecdsa::address_of(&point))
    }

    /// Signs the 32-byte `hash` with `ready` (or a new session when none),
    /// retrying once on a new session when an idle one turns out dead.
    /// Returns the session to keep (when it still works) and `r ‖ s`.
    fn sign(
        &self,
        ready: Option<Ready>,
        hash: &B256,
    ) -> (Option<Ready>, Result<Vec<u8>, SignerError>) {
        // A session of an older generation is abandoned (not closed).
        let ready = ready.filter(|ready| ready.generation == self.module.generation());
        let was_idle = ready.is_some();
        let ready = match ready.map_or_else(|| self.open(), Ok) {
            Ok(ready) => ready,
            Err(e) => return (None, Err(e)),
        };
        let signed = {
            let (_call, generation) = self.module.enter();
            if generation != ready.generation {
                // Initialised again between the open and now: once more.
                drop(_call);
                return self.sign(None, hash);
            }
            ready
                .session
                .sign(&Mechanism::Ecdsa, ready.key, hash.as_slice())
        };
        match signed {
            Ok(raw) => (Some(ready), Ok(raw)),
            // An idle session the token dropped meanwhile: once more, new.
            Err(e) if was_idle && module::is_transient(&e) => {
                self.close(ready);
                self.sign(None, hash)
            }
            Err(e) => {
                self.close(ready);
                (None, Err(self.fault("signing", &e)))
            }
        }
    }

    /// Closes `ready` if it belongs to the module's current generation
    /// (an older one's handle may name another session now).
    fn close(&self, ready: Ready) {
        let (_call, generation) = self.module.enter();
        if ready.generation == generation {
            let _ = ready.session.close();
        }
    }

    /// A module error as a signer error: transient faults (token gone,
    /// device error) are `Unavailable`, the rest `Refused`.
    fn fault(&self, doing: &str, error: &Error) -> SignerError {
        let message = format!(
            "PKCS#11 {} ({doing}): {}",
            self.key.name(),
            module::describe(error)
        );
        if module::is_transient(error) {
            SignerError::Unavailable(message)
        } else {
            SignerError::Refused(message)
        }
    }
}

#[async_trait]
impl TxSigner for Pkcs11TxSigner {
    fn address(&self) -> Address {
        self.address
    }

    fn kind(&self) -> &'static str {
        "pkcs11"
    }

    async fn sign(&self, tx: TypedTransaction) -> Result<SignedRaw, SignerError> {
        let tx = bind_chain_id(tx, self.chain_id)?;
        let hash = tx.signature_hash();
        // Closed only when the signer is dropped, which cannot happen while
        // `self` is borrowed. Held by the blocking call until the module
        // answers, even after a timeout: sessions stay within max_sessions.
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| SignerError::Unavailable("PKCS#11 signer closed".into()))?;
        let idle = self.idle.clone();
        let token = self.token.clone();
        let signing = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let ready = idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let (kept, raw) = token.sign(ready, &hash);
            let mut idle = idle.lock().unwrap_or_else(|p| p.into_inner());
            match (&raw, kept) {
                (_, Some(ready)) => idle.push(ready),
                // The token went away: the other idle sessions are dead too.
                (Err(SignerError::Unavailable(_)), None) => {
                    for ready in idle.drain(..) {
                        token.close(ready);
                    }
                }
                _ => {}
            }
            raw
        });
        let raw = tokio::time::timeout(self.timeout, signing)
            .await
            .map_err(|_| no_answer(&self.token.key.name(), self.timeout))?
            .map_err(|e| SignerError::Unavailable(format!("PKCS#11 task: {e}")))??;
        let signature = ecdsa::recoverable(&raw, &hash, self.address).ok_or_else(|| {
            SignerError::Refused(format!(
                "PKCS#11 {}: the module's signature does not recover to {}",
                self.token.key.name(),
                self.address
            ))
        })?;
        let envelope = TxEnvelope::from((tx, signature));
        let raw = envelope.encoded_2718();
        Ok(SignedRaw {
            hash: keccak256(&raw),
            raw: raw.into(),
        })
    }
}

/// A module that did not answer in time: transient, the intent waits.
fn no_answer(key: &str, timeout: Duration) -> SignerError {
    SignerError::Unavailable(format!("PKCS#11 {key}: no answer within {timeout:?}"))
}

impl Drop for Pkcs11TxSigner {
    fn drop(&mut self) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        for ready in idle.drain(..) {
            self.token.close(ready);
        }
    }
}

impl fmt::Debug for Pkcs11TxSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkcs11TxSigner")
            .field("kind", &"pkcs11")
            .field("module", &self.token.key.module)
            .field("key", &self.token.key.name())
            .field("address", &self.address)
            .field("chain_id", &self.chain_id)
            .finish_non_exhaustive()
    }
}
