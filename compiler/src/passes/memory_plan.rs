//! Memory planning: assigns every intermediate value an offset in one workspace arena.
//!
//! A value's lifetime runs from the node that defines it to the last node that reads it
//! (inclusive at both ends, so a node's outputs never share bytes with its inputs: kernels
//! may read inputs after writing outputs); a conv's input lives to the end of its
//! epilogue chain (`passes::epilogue`), which the back end computes inside the conv;
//! when the back end always folds the chain (a constant filter), the values inside it
//! (the conv's own output, the sum before the activation) get no slot, and the chain's
//! output shares the residual's slot when the chain reads the residual last and the
//! residual is not the conv's input (the fused kernel adds it in place), else stays apart
//! from it. An inverted-residual block (`passes::block`) runs at the end of its
//! projection's chain: its expanded and depthwise maps get no slot, its input lives to
//! that node, and its output never takes the slot of a residual that is its input (the
//! block's workers read input rows while others write output rows). An
//! element-wise fusion group (`passes::fusion`) is computed at its root: its members'
//! outputs other than the root's get no slot, and what the members read from outside
//! the group lives until the root. Values are placed in definition order, each in
//! the smallest free gap that fits (best fit), at 64-byte aligned offsets; a second
//! placement, largest first at the lowest free offset (greedy by size), is kept instead
//! when its arena is smaller; graphs of at most 256 intermediates that still miss the
//! peak-live bound also try up to 200 shuffled greedy orders (fixed seed: deterministic).
//! Then, within the arena so found, each value placed over bytes that values read within
//! the last few definitions held moves to bytes nobody read that recently, where some
//! are free for its whole life (`move_off_recent_reads`: with threads, the bytes a layer
//! just read may sit in another core's cache; bytes only depthwise convs read, one core
//! each channel, do not count). Graph inputs, graph outputs and constants get no slot.
//!
//! In-place concatenation: when a concat's inputs are contiguous pieces of its output
//! (every extent before the axis is 1) and each piece starts at a 64-byte boundary, the
//! inputs that are intermediates computed by a node (not graph inputs, outputs or
//! constants, not in another such group; a repeated input at its first place only) are
//! placed *inside* the output's
//! slot at their piece's offset, so their producers write the concatenation directly and
//! the back end copies nothing for them (`select::movement::concat` sees the offsets).
//! The group is placed as one value live from its first member's definition to the last
//! use of any member. Nothing else is aliased (a reshape's output gets its own slot), and
//! nodes are not reordered to reduce the peak.

use crate::ir::plan::{MemoryPlan, SLOT_ALIGN, Slot};
use crate::ir::{Graph, Op, ValueDef};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("value {0} has an unknown extent; memory planning needs every extent")]
    UnknownShape(String),
    #[error("value {0} is too large to address")]
    TooLarge(String),
}

fn round_up(n: usize) -> Option<usize> {
    n.checked_add(SLOT_ALIGN - 1)
        .map(|x| x / SLOT_ALIGN * SLOT_ALIGN)
}

/// Computes the arena layout of `graph`.
pub fn plan(graph: &Graph) -> Result<MemoryPlan, PlanError> {
    let nvals = graph.values.len();
    let mut is_output = vec![false; nvals];
    for v in &graph.outputs {
        if let Some(x) = is_output.get_mut(v.index()) {
            *x = true;
        }
    }
    // Last reader of every value (node index); a value nobody reads dies where it is born.
    let mut last = vec![None::<usize>; nvals];
    for (ni, n) in graph.nodes.iter().enumerate() {
        for v in &n.inputs {
            if let Some(l) = last.get_mut(v.index()) {
                *l = Some(ni);
            }
        }
    }
    // A conv's input stays alive to the end of its epilogue chain, which the conv computes
    // while still reading it (`passes::epilogue`); the chain's internal values get no
    // slot when the back end always fuses it.
    let users = graph.users();
    let mut internal = vec![false; nvals];
    // Inverted-residual blocks (`passes::block`), computed where the projection's chain
    // ends: their two maps get no slot, and the block's input lives to that node.
    let blocks = super::block::blocks(graph, &users);
    for b in &blocks {
        for v in b.internal(graph, &users) {
            internal[v.index()] = true;
        }
        if let Some(l) = last.get_mut(b.x.index()) {
            *l = Some(l.map_or(b.end, |l| l.max(b.end)));
        }
    }
    // Always-fused chains with a residual: (residual, chain output, chain end, whether
    // the residual is also the conv's input, which the fused kernel reads throughout).
    let mut residuals = Vec::new();
    for (ni, n) in graph.nodes.iter().enumerate() {
        let Some(c) = super::epilogue::chain(graph, &users, ni) else {
            continue;
        };
        let Some(&end) = c.nodes.last() else {
            continue;
        };
        if let Some(x) = n.inputs.first()
            && let Some(l) = last.get_mut(x.index())
        {
            *l = Some(l.map_or(end, |l| l.max(end)));
        }
        if super::epilogue::always_fused(graph, ni) {
            for v in c.internal(graph, ni) {
                internal[v.index()] = true;
            }
            if let Some(r) = c.residual {
                // A block reads its own input until its last band: a residual that is
                // that input is read throughout too.
                let read_by_conv = n.inputs.first() == Some(&r)
                    || blocks.iter().any(|b| b.project == ni && b.x == r);
                residuals.push((r.index(), c.out.index(), end, read_by_conv));
            }
        }
    }
    // A conv computed with the max pool after it (`passes::epilogue::pool_after`): the
    // pooled value gets no slot, and the conv's input stays alive to the pool.
    for (ni, n) in graph.nodes.iter().enumerate() {
        let Some(pa) = super::epilogue::pool_after(graph, &users, ni) else {
            continue;
        };
        internal[pa.pooled.index()] = true;
        if let Some(x) = n.inputs.first()
            && let Some(l) = last.get_mut(x.index())
        {
            *l = Some(l.map_or(pa.pool, |l| l.max(pa.pool)));
        }
    }
    // Element-wise fusion groups (`passes::fusion`): a member's output other than the
    // root's lives in registers only, and what members read from outside the group is read
    // when the root runs.
    let fused = super::fusion::groups(graph);
    for (ni, n) in graph.nodes.iter().enumerate() {
        let Some(root) = fused.root_of[ni] else {
            continue;
        };
        for v in &n.inputs {
            if !fused.is_internal(graph, *v)
                && let Some(l) = last.get_mut(v.index())
            {
                *l = Some(l.map_or(root, |l| l.max(root)));
            }
        }
    }
    let groups = concat_groups(graph, &is_output);
    // Member value → (group output value, byte offset inside it).
    let mut member_of: Vec<Option<(usize, usize)>> = vec![None; nvals];
    for (out, members) in &groups {
        for &(vi, at) in members {
            member_of[vi] = Some((*out, at));
        }
    }
    // The fused kernel adds the residual element by element: the chain's output may take
    // the residual's slot exactly (in place, when the chain is the residual's last
    // reader: the two then share one slot), or bytes apart from it, never a part of it. A
    // placement that overlaps them otherwise is redone with the residual alive to the
    // chain's end.
    let mut lv = Lives {
        last,
        is_output: &is_output,
        internal: &internal,
        fused: &fused,
        groups: &groups,
        member_of: &member_of,
        shares: vec![None; nvals],
        split_read: split_reads(graph, &users),
    };
    for &(r, out, end, read_by_conv) in &residuals {
        let alone = |v: usize| lv.own_entry(graph, v) && !groups.iter().any(|g| g.0 == v);
        if !read_by_conv
            && alone(r)
            && alone(out)
            && lv.last[r].is_some_and(|l| l <= end)
            && graph.values[r].ty.byte_size() == graph.values[out].ty.byte_size()
        {
            // The slot of the residual's own root, when the residual takes one itself
            // (a chain of residual blocks).
            lv.shares[out] = Some(lv.shares[r].unwrap_or(r));
        }
    }
    loop {
        let placed = place(graph, &lv)?;
        let mut again = false;
        for &(r, out, end, _) in &residuals {
            if let (Some(a), Some(b)) = (placed.slots[r], placed.slots[out])
                && !(a.offset == b.offset && a.size == b.size)
                && a.offset < b.offset + b.size
                && b.offset < a.offset + a.size
                && lv.last[r].is_none_or(|l| l < end)
            {
                lv.last[r] = Some(end);
                again = true;
            }
        }
        if !again {
            return Ok(placed);
        }
    }
}

/// Concat groups: per group, the output value and its members with their byte offsets.
type Groups = Vec<(usize, Vec<(usize, usize)>)>;

/// What a placement takes as given (see [`plan`]).
struct Lives<'a> {
    /// Last reader of every value.
    last: Vec<Option<usize>>,
    is_output: &'a [bool],
    /// Internal to an always-fused epilogue chain: no slot.
    internal: &'a [bool],
    fused: &'a super::fusion::Groups,
    groups: &'a Groups,
    /// Member value → (group output value, byte offset inside it).
    member_of: &'a [Option<(usize, usize)>],
    /// A chain's output → the value whose slot it takes: its residual, or the residual
    /// that one's slot belongs to (never itself a sharer).
    shares: Vec<Option<usize>>,
    /// Values whose every reader is a depthwise conv (see [`split_reads`]).
    split_read: Vec<bool>,
}

impl Lives<'_> {
    /// Whether node value `v` could have a slot of its own: not a graph output, not inside
    /// a fused chain or element-wise group, not a piece of an in-place concat.
    fn own_entry(&self, graph: &Graph, v: usize) -> bool {
        matches!(graph.values[v].def, ValueDef::Node(..))
            && !self.is_output[v]
            && !self.internal[v]
            && self.member_of[v].is_none()
            && !self.fused.is_internal(graph, crate::ir::ValueId(v as u32))
    }
}

/// One placement of the intermediates (see the module doc).
fn place(graph: &Graph, lv: &Lives<'_>) -> Result<MemoryPlan, PlanError> {
    let (last, groups, member_of, shares) = (&lv.last, lv.groups, lv.member_of, &lv.shares);
    let nvals = graph.values.len();
    let life = |vi: usize, first: usize| last[vi].unwrap_or(first).max(first);
    // The last node at which a chain output lives in each residual's slot.
    let mut shared_until = vec![None::<usize>; nvals];
    for (v, r) in shares.iter().enumerate() {
        if let (Some(r), ValueDef::Node(vn, _)) = (*r, graph.values[v].def) {
            let l = life(v, vn.index());
            shared_until[r] = Some(shared_until[r].map_or(l, |u| u.max(l)));
        }
    }
    // Intermediates in definition order, with [first, last] and rounded size; a group is
    // its output's entry, stretched over its members' lifetimes.
    let mut wanted = Vec::new();
    for (vi, val) in graph.values.iter().enumerate() {
        let ValueDef::Node(n, _) = val.def else {
            continue;
        };
        if !lv.own_entry(graph, vi) || shares[vi].is_some() {
            continue;
        }
        let name = format!("{}", crate::ir::ValueId(vi as u32));
        let size = val
            .ty
            .byte_size()
            .ok_or_else(|| PlanError::UnknownShape(name.clone()))?;
        let rounded = round_up(size).ok_or(PlanError::TooLarge(name))?;
        let (mut first, mut lastu) = (n.index(), life(vi, n.index()));
        if let Some((_, members)) = groups.iter().find(|g| g.0 == vi) {
            for &(m, _) in members {
                if let ValueDef::Node(mn, _) = graph.values[m].def {
                    first = first.min(mn.index());
                    lastu = lastu.max(life(m, mn.index()));
                }
            }
        }
        // A residual whose slot chain outputs take lives as long as they do.
        if let Some(u) = shared_until[vi] {
            lastu = lastu.max(u);
        }
        wanted.push((vi, size, rounded, first, lastu));
    }
    wanted.sort_by_key(|w| (w.3, w.0));

    // Two placements, the smaller arena wins (ties: the first): best fit in definition
    // order, and greedy by size.
    let (mut slots, mut arena) = best_fit(&wanted, nvals);
    let (by_size, arena2) = greedy_by_size(&wanted, nvals);
    if arena2 < arena {
        slots = by_size;
        arena = arena2;
    }
    // Peak of live (rounded) bytes over node steps: no placement can do better.
    let peak_bound = (0..graph.nodes.len())
        .map(|step| {
            wanted
                .iter()
                .filter(|w| w.3 <= step && step <= w.4)
                .map(|w| w.2)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    // Small graphs: greedy placements in shuffled orders (a fixed seed, so the plan is
    // deterministic) until one reaches the bound or the budget runs out.
    if arena > peak_bound && wanted.len() <= SEARCH_MAX_VALUES {
        let mut order: Vec<usize> = (0..wanted.len()).collect();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..SEARCH_TRIES {
            for i in (1..order.len()).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                order.swap(i, (seed % (i as u64 + 1)) as usize);
            }
            let shuffled: Vec<Wanted> = order.iter().map(|&i| wanted[i]).collect();
            let (s, a) = greedy_in_order(&shuffled, nvals);
            if a < arena {
                slots = s;
                arena = a;
                if arena <= peak_bound {
                    break;
                }
            }
        }
    }
    // Within that arena, away from bytes read just before (see `RECENT_VALUES`).
    move_off_recent_reads(&wanted, &mut slots, arena, &lv.split_read);
    // Group members inside their output's slot, with their own lifetimes.
    for (vi, m) in member_of.iter().enumerate() {
        let Some((out, at)) = *m else { continue };
        let (Some(o), ValueDef::Node(n, _)) = (slots[out], graph.values[vi].def) else {
            continue;
        };
        let size = graph.values[vi].ty.byte_size().unwrap_or(0);
        slots[vi] = Some(Slot {
            offset: o.offset + at,
            size,
            first: n.index(),
            last: life(vi, n.index()),
        });
    }
    // Chain outputs in their residual's slot, with their own lifetimes; the residual's
    // entry was stretched over theirs, its slot keeps its own.
    for (out, r) in shares.iter().enumerate() {
        let (Some(rt), ValueDef::Node(n, _)) = (*r, graph.values[out].def) else {
            continue;
        };
        if let (Some(s), ValueDef::Node(rn, _)) = (slots[rt].as_mut(), graph.values[rt].def) {
            s.last = life(rt, rn.index());
        }
        if let Some(rs) = slots[rt] {
            slots[out] = Some(Slot {
                offset: rs.offset,
                size: graph.values[out].ty.byte_size().unwrap_or(0),
                first: n.index(),
                last: life(out, n.index()),
            });
        }
    }
    Ok(MemoryPlan {
        slots,
        arena_size: arena,
        peak_live: peak_bound,
    })
}

/// The in-place concatenations (see the module doc): per group, the output value and its
/// members with their byte offsets in it. Decided in node order; a value joins at most
/// one group, and a group's output is never a member of another.
fn concat_groups(graph: &Graph, is_output: &[bool]) -> Groups {
    let mut taken = vec![false; graph.values.len()];
    let mut groups = Vec::new();
    for node in &graph.nodes {
        let (Op::Concat { axis }, [out]) = (&node.op, node.outputs.as_slice()) else {
            continue;
        };
        let o = out.index();
        let Some(shape) = graph.values[o].ty.shape() else {
            continue;
        };
        if is_output[o] || taken[o] || shape.iter().take(*axis).any(|&d| d != 1) {
            continue;
        }
        let elem = graph.values[o].ty.dtype.size();
        let mut at = 0usize;
        let mut members = Vec::new();
        for (i, x) in node.inputs.iter().enumerate() {
            let xi = x.index();
            let bytes = graph.values[xi].ty.byte_size().unwrap_or(0);
            let eligible = matches!(graph.values[xi].def, ValueDef::Node(..))
                && !is_output[xi]
                && !taken[xi]
                && at % SLOT_ALIGN == 0
                && bytes > 0
                && !node.inputs[..i].contains(x);
            if eligible {
                members.push((xi, at));
            }
            at += bytes;
        }
        debug_assert_eq!(at, shape.iter().product::<usize>() * elem);
        if !members.is_empty() {
            taken[o] = true;
            for &(m, _) in &members {
                taken[m] = true;
            }
            groups.push((o, members));
        }
    }
    groups
}

/// A value to place: (value index, bytes, rounded bytes, first node, last node).
type Wanted = (usize, usize, usize, usize, usize);

/// Greedy by size (the offline heuristic of TensorFlow Lite's arena planner): largest
/// values first, each at the lowest offset free for its whole lifetime. Where lifetimes
/// interleave (a U-Net's skip connections, an attention block's branches) it packs
/// tighter than placing in definition order, which cannot move what it placed earlier.
fn greedy_by_size(wanted: &[Wanted], nvals: usize) -> (Vec<Option<Slot>>, usize) {
    let mut order: Vec<Wanted> = wanted.to_vec();
    order.sort_by(|a, b| b.2.cmp(&a.2).then(a.3.cmp(&b.3)).then(a.0.cmp(&b.0)));
    greedy_in_order(&order, nvals)
}

/// Graphs with at most this many intermediates get the shuffled search.
const SEARCH_MAX_VALUES: usize = 256;
/// Orders the search tries at most (each placement is quadratic in the values).
const SEARCH_TRIES: usize = 200;

/// Each value, in the given order, at the lowest offset free for its whole lifetime.
fn greedy_in_order(order: &[Wanted], nvals: usize) -> (Vec<Option<Slot>>, usize) {
    let mut slots = vec![None; nvals];
    // Placed values: (offset, rounded size, first, last).
    let mut placed: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut arena = 0usize;
    for &(vi, size, rounded, first, lastu) in order {
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|p| p.2 <= lastu && first <= p.3)
            .map(|p| (p.0, p.0 + p.1))
            .collect();
        busy.sort_unstable();
        let mut offset = 0usize;
        for (lo, hi) in busy {
            if lo >= offset + rounded {
                break;
            }
            offset = offset.max(hi);
        }
        arena = arena.max(offset + rounded);
        placed.push((offset, rounded, first, lastu));
        slots[vi] = Some(Slot {
            offset,
            size,
            first,
            last: lastu,
        });
    }
    (slots, arena)
}

/// Values whose every reader is a depthwise conv reading it as its input: on several
/// threads such a conv splits the channels (and rows) among the workers, so each byte of
/// its input is read by one core only (but a band's halo rows), and a value placed over
/// it later waits for no other core's cache. [`move_off_recent_reads`] does not keep
/// values off such bytes. Zen 4, two threads (`nnefc bench --profile --threads 2`):
/// mobilenet_v2's 7² stage had no bytes both unread by the 1×1 layers just before and
/// free for a 960-channel map (the 576-channel 14² map the stride-2 depthwise conv read
/// held the rest), so its depthwise layers conv47 and conv50 wrote over the map the
/// projection before had read on both cores and took as long as on one thread.
fn split_reads(graph: &Graph, users: &[Vec<crate::ir::NodeId>]) -> Vec<bool> {
    users
        .iter()
        .enumerate()
        .map(|(v, us)| {
            !us.is_empty()
                && us.iter().all(|n| {
                    graph.nodes[n.index()].inputs.first().map(|x| x.index()) == Some(v)
                        && super::block::depthwise(graph, n.index())
                })
        })
        .collect()
}

/// How many values defined before a value's own definition (placed values, in
/// definition order) count as "just before" for [`move_off_recent_reads`].
///
/// Why: a layer that writes bytes another core read last waits for every such line to be
/// taken from that core's cache. With several threads a GEMM split by columns reads
/// every channel of its input on every core, so the layer placed over that input next
/// pays it. mobilenet_v2's depthwise layers on 14² and 7² maps (one output per nine
/// multiply-adds) wrote over the buffer the block before's projection had just read on
/// both cores, and took longer on two threads than on one (960 channels on 7² 0.028 →
/// 0.033 ms). Zen 4, two threads (`nnefc bench --profile --threads 2 -n 400`, cores close:
/// `round_trip` 94 ns), with a value kept off bytes read within the last 4 / 6 node steps
/// (2–3 layers) / 12 steps (6 layers): 960×7² 0.033 → 0.025 / 0.015, 384×14² 0.024 →
/// 0.019 / 0.014, 576×14² 0.031 → 0.023 / 0.021, the model 3.62 → 3.57 / 3.49 ms; at 6
/// steps the buffers rotate over two blocks and the 160→960 expansions lost what the
/// depthwise layers gained. (Those runs moved values to the lowest free offset; the
/// warmest qualifying bytes, as now, measured alike.) Interleaved `nnefc bench -n 400`
/// (three to four pairs per setting, several settings of the window): two threads
/// 3.57–3.73 → 3.49–3.57 ms; one thread within the run-to-run noise (6.77–6.88 → 6.71–6.81
/// in one series, +1 % in another); resnet18, squeezenet1_1, tiny_cnn and encoder, whose
/// plans also change, the same at one and two threads.
const RECENT_VALUES: usize = 6;

/// Moves each value (in definition order) whose slot overlaps bytes that a value dying
/// within the last [`RECENT_VALUES`] definitions occupied, to the smallest gap of the
/// arena that is free for its whole life and overlaps no such bytes; values with no such
/// gap stay. The arena does not grow and no two live values ever share bytes, so the
/// plan stays valid; where the arena is tight (the big early layers of a CNN) nothing
/// moves.
fn move_off_recent_reads(
    wanted: &[Wanted],
    slots: &mut [Option<Slot>],
    arena: usize,
    split_read: &[bool],
) {
    for (i, &(vi, _, rounded, first, lastu)) in wanted.iter().enumerate() {
        let Some(cur) = slots[vi] else { continue };
        // The definition step of the value RECENT_VALUES places before this one: values
        // whose last reader ran at or after it were read "just before".
        let since = wanted[i.saturating_sub(RECENT_VALUES)].3;
        // Bytes of values dead before this one's definition, with their last reader and
        // whether every core read them (`wanted` is in definition order, so only earlier
        // entries can be).
        let dead: Vec<(usize, usize, usize, bool)> = wanted[..i]
            .iter()
            .filter(|o| o.4 < first)
            .filter_map(|o| slots[o.0].map(|s| (s.offset, s.offset + o.2, o.4, !split_read[o.0])))
            .collect();
        // The last reader of what `[off, off + rounded)` held, and of the bytes there
        // every core read.
        let touched = |off: usize| {
            let over = dead.iter().filter(|d| d.0 < off + rounded && off < d.1);
            let last = over.clone().map(|d| d.2).max();
            (last, over.filter(|d| d.3).map(|d| d.2).max())
        };
        if touched(cur.offset).1.is_none_or(|l| l < since) {
            continue;
        }
        // Free gaps over this value's life: between the byte ranges of the other values
        // live with it, up to the arena's top.
        let mut busy: Vec<(usize, usize)> = wanted
            .iter()
            .filter(|o| o.0 != vi && o.3 <= lastu && first <= o.4)
            .filter_map(|o| slots[o.0].map(|s| (s.offset, s.offset + o.2)))
            .collect();
        busy.sort_unstable();
        busy.push((arena, arena));
        let mut gaps = Vec::new();
        let mut cursor = 0usize;
        for (lo, hi) in busy {
            if lo >= cursor + rounded {
                gaps.push((cursor, lo));
            }
            cursor = cursor.max(hi);
        }
        // Where it may go: the start of each gap, and the start and end of each dead
        // value's bytes, once each. Among those inside a gap and clear of recent reads,
        // the bytes last read latest (likeliest still in this core's cache), then the
        // lowest offset.
        let mut starts: Vec<usize> = gaps.iter().map(|g| g.0).collect();
        starts.extend(
            dead.iter()
                .flat_map(|d| [Some(d.0), round_up(d.1)])
                .flatten(),
        );
        starts.sort_unstable();
        starts.dedup();
        let mut best: Option<(Option<usize>, core::cmp::Reverse<usize>)> = None;
        let mut g = 0;
        for off in starts {
            while g < gaps.len() && gaps[g].1 < off.saturating_add(rounded) {
                g += 1;
            }
            let Some(&(glo, _)) = gaps.get(g) else { break };
            if off < glo {
                continue;
            }
            let (last, shared) = touched(off);
            let key = (last, core::cmp::Reverse(off));
            if shared.is_none_or(|l| l < since) && best.is_none_or(|b| key > b) {
                best = Some(key);
            }
        }
        if let Some((_, core::cmp::Reverse(offset))) = best {
            slots[vi] = Some(Slot { offset, ..cur });
        }
    }
}

/// Best fit in definition order: each value in the smallest gap between the values live
/// when it is defined, else on top.
fn best_fit(wanted: &[Wanted], nvals: usize) -> (Vec<Option<Slot>>, usize) {
    let mut slots = vec![None; nvals];
    // Currently placed values: (offset, rounded size, last use), kept sorted by offset.
    let mut live: Vec<(usize, usize, usize)> = Vec::new();
    let mut arena = 0usize;
    for &(vi, size, rounded, first, lastu) in wanted {
        live.retain(|&(_, _, l)| l >= first);
        // Gaps between live blocks; pick the smallest that fits, else append at the top.
        let mut best: Option<(usize, usize)> = None; // (gap size, offset)
        let mut cursor = 0usize;
        for &(off, sz, _) in &live {
            if off >= cursor {
                let gap = off - cursor;
                if gap >= rounded && best.is_none_or(|(g, _)| gap < g) {
                    best = Some((gap, cursor));
                }
            }
            cursor = cursor.max(off + sz);
        }
        let offset = match best {
            Some((_, off)) => off,
            None => cursor,
        };
        arena = arena.max(offset + rounded);
        let pos = live.partition_point(|&(o, _, _)| o < offset);
        live.insert(pos, (offset, rounded, lastu));
        slots[vi] = Some(Slot {
            offset,
            size,
            first,
            last: lastu,
        });
    }
    (slots, arena)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, Op, TensorType, UnaryOp, ValueId};

    fn chain(n: usize, len: usize) -> Graph {
        let mut g = Graph::new("chain");
        let ty = TensorType::new(DType::F32, &[len]);
        let mut v = g.add_input("x", ty.clone());
        // Softmax: not element-wise, so no fusion group hides the values.
        for _ in 0..n {
            v = g.add_node(Op::Softmax { axes: vec![0] }, vec![v], vec![ty.clone()])[0];
        }
        g.outputs.push(v);
        g
    }

    #[test]
    fn chain_reuses_two_slots() {
        let p = plan(&chain(5, 10)).unwrap();
        expect_test::expect![[r#"
            %v1 @0 +40 live [0, 1]
            %v2 @64 +40 live [1, 2]
            %v3 @0 +40 live [2, 3]
            %v4 @64 +40 live [3, 4]
            arena 128 bytes (peak live 128)"#]]
        .assert_eq(&p.to_string());
    }

    /// A large value first leaves room in the arena: once it was read more than
    /// `RECENT_VALUES` definitions ago, each value of the chain after it is placed away
    /// from the bytes of values read within that window (on the bytes last read latest
    /// among the others), where best fit alone alternates between two slots; before
    /// that (every byte was read within the window) best fit's slot stays. The arena
    /// does not grow and live values never share bytes.
    #[test]
    fn values_keep_off_bytes_read_just_before() {
        let mut g = Graph::new("g");
        let big = TensorType::new(DType::F32, &[16 * 20]);
        let one = TensorType::new(DType::F32, &[1]);
        let x = g.add_input("x", big.clone());
        let a = g.add_node(Op::Softmax { axes: vec![0] }, vec![x], vec![big])[0];
        let sum = Op::Reduce {
            op: crate::ir::ReduceOp::Sum,
            axes: vec![0],
        };
        let mut v = g.add_node(sum, vec![a], vec![one.clone()])[0];
        for _ in 0..14 {
            v = g.add_node(Op::Softmax { axes: vec![0] }, vec![v], vec![one.clone()])[0];
        }
        g.outputs.push(v);
        let p = plan(&g).unwrap();
        expect_test::expect![[r#"
            %v1 @0 +1280 live [0, 1]
            %v2 @1280 +4 live [1, 2]
            %v3 @0 +4 live [2, 3]
            %v4 @64 +4 live [3, 4]
            %v5 @0 +4 live [4, 5]
            %v6 @64 +4 live [5, 6]
            %v7 @0 +4 live [6, 7]
            %v8 @64 +4 live [7, 8]
            %v9 @128 +4 live [8, 9]
            %v10 @1280 +4 live [9, 10]
            %v11 @192 +4 live [10, 11]
            %v12 @256 +4 live [11, 12]
            %v13 @320 +4 live [12, 13]
            %v14 @384 +4 live [13, 14]
            %v15 @0 +4 live [14, 15]
            arena 1344 bytes (peak live 1344)"#]]
        .assert_eq(&p.to_string());
    }

    /// Bytes that only a depthwise conv read (each core its own channels) do not count as
    /// read just before: a value stays over them, where over bytes every core read it
    /// moves to older ones. Value 8 (1 KiB at 0) is read at step 8, value 9 is placed
    /// over it at step 9; value 0's bytes at 2048 were last read at step 0, and six small
    /// values between make that long enough ago.
    #[test]
    fn bytes_one_core_read_count_as_cold() {
        let slot = |offset, first, last| {
            Some(Slot {
                offset,
                size: 1024,
                first,
                last,
            })
        };
        let mut wanted: Vec<Wanted> = vec![(0, 1024, 1024, 0, 0)];
        let mut slots = vec![slot(2048, 0, 0)];
        for i in 1..=6 {
            wanted.push((i, 64, 64, i, i));
            slots.push(Some(Slot {
                offset: 3072 + 64 * i,
                size: 64,
                first: i,
                last: i,
            }));
        }
        wanted.extend([
            (7, 1024, 1024, 7, 10),
            (8, 1024, 1024, 7, 8),
            (9, 1024, 1024, 9, 10),
        ]);
        slots.extend([slot(1024, 7, 10), slot(0, 7, 8), slot(0, 9, 10)]);
        for (split, expect) in [(false, 2048), (true, 0)] {
            let mut s = slots.clone();
            let mut split_read = vec![false; 10];
            split_read[8] = split;
            move_off_recent_reads(&wanted, &mut s, 3072 + 64 * 7, &split_read);
            assert_eq!(s[9].map(|s| s.offset), Some(expect), "split read: {split}");
            assert_eq!(s[..9], slots[..9]);
        }
    }

    /// `split_reads`: a value only a depthwise conv reads, and not one a 1×1 conv reads
    /// too.
    #[test]
    fn only_depthwise_readers_split() {
        use crate::ir::{ConvAttrs, Tensor};
        let mut g = Graph::new("g");
        let ty = TensorType::new(DType::F32, &[1, 4, 5, 5]);
        let x = g.add_input("x", ty.clone());
        let a = g.add_node(Op::Softmax { axes: vec![1] }, vec![x], vec![ty.clone()])[0];
        let b = g.add_node(Op::Softmax { axes: vec![1] }, vec![x], vec![ty.clone()])[0];
        let (f1, bias) = weights(&mut g);
        let fd = g.add_const(Tensor::f32(vec![4, 1, 3, 3], vec![0.5; 36]), None, None);
        let dw = ConvAttrs {
            padding: vec![(1, 1), (1, 1)],
            groups: 4,
            ..ConvAttrs::default()
        };
        let d = g.add_node(Op::Conv(dw.clone()), vec![a, fd, bias], vec![ty.clone()])[0];
        let e = g.add_node(Op::Conv(dw), vec![b, fd, bias], vec![ty.clone()])[0];
        let p = g.add_node(Op::Conv(ConvAttrs::default()), vec![b, f1, bias], vec![ty])[0];
        g.outputs.extend([d, e, p]);
        let split = split_reads(&g, &g.users());
        assert_eq!([a, b, d].map(|v| split[v.index()]), [true, false, false]);
    }

    /// An element-wise fusion group (`passes::fusion`): the member output that stays in
    /// registers gets no slot, and the softmax output the first member reads lives until
    /// the group's root runs.
    #[test]
    fn fused_members_take_no_slot_and_keep_operands() {
        let mut g = Graph::new("g");
        let ty = TensorType::new(DType::F32, &[10]);
        let x = g.add_input("x", ty.clone());
        let sm = |g: &mut Graph, v| {
            g.add_node(Op::Softmax { axes: vec![0] }, vec![v], vec![ty.clone()])[0]
        };
        let a = sm(&mut g, x);
        let r = g.add_node(Op::Unary(UnaryOp::Relu), vec![a], vec![ty.clone()])[0];
        let b = sm(&mut g, x);
        let y = g.add_node(
            Op::Binary(crate::ir::BinaryOp::Add),
            vec![r, b],
            vec![ty.clone()],
        )[0];
        g.outputs.push(y);
        let p = plan(&g).unwrap();
        expect_test::expect![[r#"
            %v1 @0 +40 live [0, 3]
            %v3 @64 +40 live [2, 3]
            arena 128 bytes (peak live 128)"#]]
        .assert_eq(&p.to_string());
        // All element-wise: one group, nothing in the arena.
        let mut g = Graph::new("g");
        let x = g.add_input("x", ty.clone());
        let mut v = x;
        for _ in 0..4 {
            v = g.add_node(Op::Unary(UnaryOp::Relu), vec![v], vec![ty.clone()])[0];
        }
        g.outputs.push(v);
        assert_eq!(plan(&g).unwrap().arena_size, 0);
    }

    /// `relu(conv(input, filter, bias) + residual)` on `[1, 4, 5, 5]` (a 1×1 conv): an
    /// epilogue chain (`passes::epilogue`).
    fn conv_add_relu(g: &mut Graph, input: ValueId, f: ValueId, b: ValueId, r: ValueId) -> ValueId {
        use crate::ir::{BinaryOp, ConvAttrs};
        let ty = g.ty(input).clone();
        let conv = Op::Conv(ConvAttrs::default());
        let c = g.add_node(conv, vec![input, f, b], vec![ty.clone()])[0];
        let a = g.add_node(Op::Binary(BinaryOp::Add), vec![c, r], vec![ty.clone()])[0];
        g.add_node(Op::Unary(UnaryOp::Relu), vec![a], vec![ty])[0]
    }

    /// A softmax over channels (not element-wise, so no fusion group hides its output).
    fn softmax(g: &mut Graph, v: ValueId) -> ValueId {
        let ty = g.ty(v).clone();
        g.add_node(Op::Softmax { axes: vec![1] }, vec![v], vec![ty])[0]
    }

    /// The 1×1 filter and bias of [`conv_add_relu`], as constants.
    fn weights(g: &mut Graph) -> (ValueId, ValueId) {
        use crate::ir::Tensor;
        (
            g.add_const(Tensor::f32(vec![4, 4, 1, 1], vec![0.5; 16]), None, None),
            g.add_const(Tensor::f32(vec![1, 4], vec![0.25; 4]), None, None),
        )
    }

    /// `x → softmax s, softmax r → conv(s) → add r → relu y → softmax z`, the conv's filter
    /// a constant (`const_filter`) or a graph input; with `r_later`, `r` is read again
    /// after the chain; with `r_is_s`, the residual is the conv's input `s` itself.
    fn conv_chain(const_filter: bool, r_later: bool, r_is_s: bool) -> Graph {
        use crate::ir::{BinaryOp, Tensor};
        let mut g = Graph::new("g");
        let ty = TensorType::new(DType::F32, &[1, 4, 5, 5]);
        let x = g.add_input("x", ty.clone());
        let (f, b) = if const_filter {
            weights(&mut g)
        } else {
            let f = g.add_input("f", TensorType::new(DType::F32, &[4, 4, 1, 1]));
            (
                f,
                g.add_const(Tensor::f32(vec![1, 4], vec![0.25; 4]), None, None),
            )
        };
        let s = softmax(&mut g, x);
        let r = if r_is_s { s } else { softmax(&mut g, x) };
        let y = conv_add_relu(&mut g, s, f, b, r);
        let z = softmax(&mut g, y);
        let z = if r_later {
            g.add_node(Op::Binary(BinaryOp::Mul), vec![z, r], vec![ty])[0]
        } else {
            z
        };
        g.outputs.push(z);
        g
    }

    /// An always-fused epilogue chain (`passes::epilogue`): the conv's output and the sum
    /// get no slot, the conv's input lives to the relu, and the relu's output takes the
    /// residual's slot when the chain is its last reader, bytes apart otherwise (and when
    /// the residual is the conv's input, which the fused kernel reads throughout). With a
    /// computed filter every value keeps its slot.
    #[test]
    fn epilogue_chains_take_no_slot() {
        let p = plan(&conv_chain(true, false, false)).unwrap();
        expect_test::expect![[r#"
            %v3 @0 +400 live [0, 4]
            %v4 @448 +400 live [1, 3]
            %v7 @448 +400 live [4, 5]
            arena 896 bytes (peak live 896)"#]]
        .assert_eq(&p.to_string());
        let p = plan(&conv_chain(true, true, false)).unwrap();
        expect_test::expect![[r#"
            %v3 @0 +400 live [0, 4]
            %v4 @448 +400 live [1, 6]
            %v7 @896 +400 live [4, 5]
            %v8 @0 +400 live [5, 6]
            arena 1344 bytes (peak live 1344)"#]]
        .assert_eq(&p.to_string());
        let p = plan(&conv_chain(true, false, true)).unwrap();
        expect_test::expect![[r#"
            %v3 @0 +400 live [0, 3]
            %v6 @448 +400 live [3, 4]
            arena 896 bytes (peak live 896)"#]]
        .assert_eq(&p.to_string());
        let p = plan(&conv_chain(false, false, false)).unwrap();
        expect_test::expect![[r#"
            %v3 @0 +400 live [0, 4]
            %v4 @448 +400 live [1, 3]
            %v5 @896 +400 live [2, 3]
            %v6 @1344 +400 live [3, 4]
            %v7 @448 +400 live [4, 5]
            arena 1792 bytes (peak live 1792)"#]]
        .assert_eq(&p.to_string());
    }

    /// `x → softmax s → conv (3 → 8 channels, 3×3 stride 2) → relu → max_pool (3×3
    /// stride 2) → softmax z`: the conv and the pool are computed together
    /// (`epilogue::pool_after`), so neither the conv's output nor the relu's has a slot,
    /// and `s` lives to the pool. With the relu's output also read after the pool, the
    /// conv and the pool are apart: that output keeps its slot (the conv's own output
    /// is still inside its epilogue chain) and `s` dies at the conv.
    #[test]
    fn a_pool_after_a_first_layer_conv_takes_no_slot() {
        use crate::ir::{Border, ConvAttrs, Tensor, UnaryOp, WindowAttrs};
        let build = |read_later: bool| {
            let mut g = Graph::new("g");
            let x = g.add_input("x", TensorType::new(DType::F32, &[1, 3, 9, 9]));
            let f = g.add_const(Tensor::f32(vec![8, 3, 3, 3], vec![0.5; 216]), None, None);
            let b = g.add_const(Tensor::f32(vec![1, 8], vec![0.25; 8]), None, None);
            let s = softmax(&mut g, x);
            let conv = ConvAttrs {
                stride: vec![2, 2],
                ..Default::default()
            };
            let c4 = TensorType::new(DType::F32, &[1, 8, 4, 4]);
            let c = g.add_node(Op::Conv(conv), vec![s, f, b], vec![c4.clone()])[0];
            let r = g.add_node(Op::Unary(UnaryOp::Relu), vec![c], vec![c4])[0];
            let pool = WindowAttrs {
                size: vec![1, 1, 3, 3],
                border: Border::Ignore,
                padding: vec![(0, 0); 4],
                stride: vec![1, 1, 2, 2],
                dilation: Vec::new(),
                output_shape: Vec::new(),
            };
            let p1 = TensorType::new(DType::F32, &[1, 8, 1, 1]);
            let m = g.add_node(Op::MaxPool(pool), vec![r], vec![p1])[0];
            let z = softmax(&mut g, m);
            g.outputs.push(z);
            if read_later {
                let z2 = softmax(&mut g, r);
                g.outputs.push(z2);
            }
            g
        };
        expect_test::expect![[r#"
            %v3 @0 +972 live [0, 3]
            %v6 @1024 +32 live [3, 4]
            arena 1088 bytes (peak live 1088)"#]]
        .assert_eq(&plan(&build(false)).unwrap().to_string());
        expect_test::expect![[r#"
            %v3 @0 +972 live [0, 2]
            %v5 @1024 +512 live [2, 5]
            %v6 @0 +32 live [3, 4]
            arena 1536 bytes (peak live 1536)"#]]
        .assert_eq(&plan(&build(true)).unwrap().to_string());
    }

    /// Two chains, the second's residual the first's output (ResNet's blocks): both
    /// outputs take the first residual's slot, which no other value shares while either
    /// lives.
    #[test]
    fn residual_slots_pass_down_chains() {
        let mut g = Graph::new("g");
        let x = g.add_input("x", TensorType::new(DType::F32, &[1, 4, 5, 5]));
        let r0 = softmax(&mut g, x);
        let a = softmax(&mut g, x);
        let (f, bias) = weights(&mut g);
        let y1 = conv_add_relu(&mut g, a, f, bias, r0);
        let b = softmax(&mut g, y1);
        let (f, bias) = weights(&mut g);
        let y2 = conv_add_relu(&mut g, b, f, bias, y1);
        let z = softmax(&mut g, y2);
        g.outputs.push(z);
        let p = plan(&g).unwrap();
        expect_test::expect![[r#"
            %v1 @0 +400 live [0, 3]
            %v2 @448 +400 live [1, 4]
            %v7 @0 +400 live [4, 7]
            %v8 @448 +400 live [5, 8]
            %v13 @0 +400 live [8, 9]
            arena 896 bytes (peak live 896)"#]]
        .assert_eq(&p.to_string());
        let (s0, s1, s2) = (
            p.slot(r0).unwrap(),
            p.slot(y1).unwrap(),
            p.slot(y2).unwrap(),
        );
        assert!(s0.offset == s1.offset && s1.offset == s2.offset);
        for v in [a, b] {
            let s = p.slot(v).unwrap();
            assert_ne!(s.offset, s0.offset, "{v} in the residuals' slot");
        }
    }

    #[test]
    fn best_fit_picks_smallest_gap() {
        // a(big) b(small) live together; after both die, a small value goes to the small gap.
        let mut g = Graph::new("g");
        let big = TensorType::new(DType::F32, &[64]);
        let small = TensorType::new(DType::F32, &[8]);
        let x = g.add_input("x", big.clone());
        let a = g.add_node(Op::Softmax { axes: vec![0] }, vec![x], vec![big.clone()])[0];
        let b = g.add_node(Op::Softmax { axes: vec![0] }, vec![x], vec![small.clone()])[0];
        let c = g.add_node(Op::Softmax { axes: vec![0] }, vec![a], vec![big.clone()])[0];
        let d = g.add_node(Op::Softmax { axes: vec![0] }, vec![b], vec![small.clone()])[0];
        g.outputs.push(c);
        g.outputs.push(d);
        let p = plan(&g).unwrap();
        expect_test::expect![[r#"
            %v1 @0 +256 live [0, 2]
            %v2 @256 +32 live [1, 3]
            arena 320 bytes (peak live 320)"#]]
        .assert_eq(&p.to_string());
    }
}
