//! txmgr engine.
