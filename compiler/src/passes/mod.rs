//! Optimization passes over the IR (in progress).
