//! Optimization passes over the IR (in progress).

pub mod memory_plan;
