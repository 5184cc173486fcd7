//! (in progress) dat
