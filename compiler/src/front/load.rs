//! (in progress) load
