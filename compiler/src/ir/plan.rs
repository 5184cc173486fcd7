//! Memory plan: where each intermediate value lives in the workspace arena.
//!
//! This is a side table over a [`Graph`](super::Graph) (indexed by [`ValueId`]); it is
//! computed by `passes::memory_plan` and consumed by the back end. It holds no policy:
//! which values get a slot and how offsets are chosen is the pass's business. Graph
//! inputs, graph outputs and constants never get a slot (they live in caller buffers or
//! read-only data).

use super::graph::ValueId;
use std::fmt;

/// Alignment of every slot offset and of the arena itself, in bytes.
pub const SLOT_ALIGN: usize = 64;

/// A byte range of the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Byte offset from the start of the arena; a multiple of [`SLOT_ALIGN`].
    pub offset: usize,
    /// Bytes used by the value (not rounded).
    pub size: usize,
    /// Index of the node that defines the value (first step it is live).
    pub first: usize,
    /// Index of the last node that reads it (last step it is live).
    pub last: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MemoryPlan {
    /// One entry per graph value; `Some` for values that live in the arena.
    pub slots: Vec<Option<Slot>>,
    /// Bytes of arena needed (a multiple of [`SLOT_ALIGN`]).
    pub arena_size: usize,
    /// Lower bound: the largest total of (64-byte rounded) live bytes at any node.
    pub peak_live: usize,
}

impl MemoryPlan {
    pub fn slot(&self, v: ValueId) -> Option<Slot> {
        self.slots.get(v.index()).copied().flatten()
    }
}

impl fmt::Display for MemoryPlan {
    /// One line per slot, then `arena <size> bytes (peak live <bound>)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(s) = s {
                writeln!(
                    f,
                    "{} @{} +{} live [{}, {}]",
                    ValueId(i as u32),
                    s.offset,
                    s.size,
                    s.first,
                    s.last
                )?;
            }
        }
        write!(
            f,
            "arena {} bytes (peak live {})",
            self.arena_size, self.peak_live
        )
    }
}
