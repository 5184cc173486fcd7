//! Seeded random differential tests across op families (shapes, attributes and values
//! drawn per case, size-1 dims and broadcasting on purpose), vectorized and scalar-only,
//! and the windowed/conv families again in self-contained mode (tiled GEMM path).
//! Cases `ir::infer` rejects are skipped; each test asserts enough valid ones remain.

use super::harness::{Rng, opts};
use super::window::{Arg, Batch, Below, conv_attrs};
use crate::back::BackendOptions;
use crate::ir::{BinaryOp, Border, DType, Op, ReduceOp, UnaryOp, WindowAttrs};

/// A shape of rank 1..=4 with extents 1..=6 (a third of them 1).
fn shape(r: &mut Rng) -> Vec<usize> {
    let rank = 1 + r.below(4);
    (0..rank)
        .map(|_| if r.below(3) == 0 { 1 } else { 1 + r.below(6) })
        .collect()
}

/// A shape that broadcasts to `s`: trailing dims dropped, some extents set to 1.
fn broadcastable(r: &mut Rng, s: &[usize]) -> Vec<usize> {
    let keep = 1 + r.below(s.len());
    s[..keep]
        .iter()
        .map(|&n| if r.below(2) == 0 { 1 } else { n })
        .collect()
}

/// Checks `b` with f32x4 code, or (`scalar`) with scalar-only code. A batch is consumed
/// by its check, so callers test the scalar path on a batch of its own seed.
fn both(b: Batch, prefix: &str, scalar: bool) {
    if scalar {
        b.check_with(&BackendOptions {
            vectorize: false,
            ..opts(prefix)
        });
    } else {
        b.check(prefix);
    }
}

fn elementwise_batch(seed: u64) -> Batch {
    let mut r = Rng::new(seed);
    let mut b = Batch::new();
    use BinaryOp as B;
    let fops = [
        B::Add,
        B::Sub,
        B::Mul,
        B::Div,
        B::Min,
        B::Max,
        B::Pow,
        B::Lt,
        B::Ge,
    ];
    for _ in 0..40 {
        let s = shape(&mut r);
        let t = broadcastable(&mut r, &s);
        let (x, y) = if r.below(2) == 0 { (s, t) } else { (t, s) };
        let op = fops[r.below(fops.len())];
        let (lo, hi) = if op == B::Pow {
            (0.1, 2.0)
        } else {
            (-2.0, 2.0)
        };
        let xt = r.tensor(DType::F32, &x, lo, hi);
        let mut yt = r.tensor(DType::F32, &y, -2.0, 2.0);
        if op == B::Div {
            yt = r.tensor(DType::F32, &y, 0.5, 2.0);
        }
        b.add(
            format!("{op:?} {x:?} {y:?}"),
            Op::Binary(op),
            vec![Arg::In(xt), Arg::In(yt)],
        );
        let u = [UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Abs][r.below(4)];
        let ut = r.tensor(DType::F32, &x, -3.0, 3.0);
        b.add(format!("{u:?} {x:?}"), Op::Unary(u), vec![Arg::In(ut)]);
    }
    b
}

#[test]
fn elementwise_random() {
    let b = elementwise_batch(71);
    assert!(b.len() >= 70, "{} valid cases", b.len());
    both(b, "rel", false);
    both(elementwise_batch(72), "rels", true);
}

fn reduce_movement_batch(seed: u64) -> Batch {
    let mut r = Rng::new(seed);
    let mut b = Batch::new();
    for _ in 0..25 {
        let s = shape(&mut r);
        let rank = s.len();
        let x = r.tensor(DType::F32, &s, -2.0, 2.0);
        // Reductions over a random subset of axes (possibly empty).
        let axes: Vec<usize> = (0..rank).filter(|_| r.below(2) == 0).collect();
        let op = [
            ReduceOp::Sum,
            ReduceOp::Mean,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::ArgMax,
            ReduceOp::ArgMin,
        ][r.below(6)];
        b.add(
            format!("{op:?} {s:?} {axes:?}"),
            Op::Reduce {
                op,
                axes: axes.clone(),
            },
            vec![Arg::In(x.clone())],
        );
        if !axes.is_empty() {
            b.add(
                format!("softmax {s:?} {axes:?}"),
                Op::Softmax { axes },
                vec![Arg::In(x.clone())],
            );
        }
        // Transpose by a random permutation.
        let mut perm: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            perm.swap(i, r.below(i + 1));
        }
        b.add(
            format!("transpose {s:?} {perm:?}"),
            Op::Transpose { axes: perm },
            vec![Arg::In(x.clone())],
        );
        // Slice with random bounds and strides (negative too).
        let ax = r.below(rank);
        let n = s[ax] as i64;
        let stride = [1i64, 2, -1, 3][r.below(4)];
        let (begin, end) = if stride > 0 {
            (r.below(n as usize) as i64, 0)
        } else {
            (-1, -(n + 1))
        };
        b.add(
            format!("slice {s:?} axis {ax} {begin}..{end} by {stride}"),
            Op::Slice {
                axes: vec![ax],
                begin: vec![begin],
                end: vec![end],
                stride: vec![stride],
            },
            vec![Arg::In(x.clone())],
        );
        // Pad with every border mode; padding up to the extent (reflect needs < n).
        let border = [
            Border::Constant,
            Border::Replicate,
            Border::Reflect,
            Border::ReflectEven,
        ][r.below(4)];
        let padding: Vec<(usize, usize)> = s
            .iter()
            .map(|&n| (r.below(n.min(3) + 1), r.below(n.min(3) + 1)))
            .collect();
        b.add(
            format!("pad {s:?} {padding:?} {border:?}"),
            Op::Pad {
                padding,
                border,
                value: 0.5,
            },
            vec![Arg::In(x.clone())],
        );
        let repeats: Vec<usize> = s.iter().map(|_| 1 + r.below(3)).collect();
        b.add(
            format!("tile {s:?} {repeats:?}"),
            Op::Tile { repeats },
            vec![Arg::In(x.clone())],
        );
        let ax = r.below(rank);
        let mut s2 = s.clone();
        s2[ax] = 1 + r.below(3);
        let y = r.tensor(DType::F32, &s2, -2.0, 2.0);
        b.add(
            format!("concat {s:?} {s2:?} axis {ax}"),
            Op::Concat { axis: ax },
            vec![Arg::In(x.clone()), Arg::Const(y)],
        );
    }
    b
}

#[test]
fn reduce_and_movement_random() {
    let b = reduce_movement_batch(73);
    assert!(b.len() >= 120, "{} valid cases", b.len());
    both(b, "rrm", false);
    both(reduce_movement_batch(74), "rrms", true);
}

/// Convs (groups 1, 2 and = channels, strides 2 on odd sizes, auto padding, every border)
/// and pools in a self-contained object: the tiled GEMM path.
#[test]
fn conv_and_pools_self_contained_random() {
    let mut r = Rng::new(75);
    let mut b = Batch::new();
    let mut tries = 0;
    while b.len() < 40 && tries < 1000 {
        tries += 1;
        let mut a = conv_attrs(&mut r, 2, true);
        a.groups = [1, 2, 0][r.below(3)];
        let c = 2 * (1 + r.below(2));
        let cout = if a.groups == 0 {
            c
        } else {
            2 * (1 + r.below(3))
        };
        // groups = 0 is depthwise: one input channel per group.
        let cg = c.checked_div(a.groups).unwrap_or(1);
        let xs = vec![1 + r.below(2), c, 1 + 2 * r.below(5), 2 + r.below(7)];
        let fs = vec![cout, cg, 1 + r.below(3), 1 + r.below(3)];
        let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
        let f = r.tensor(DType::F32, &fs, -1.0, 1.0);
        let bias = r.tensor(DType::F32, &[1, cout], -1.0, 1.0);
        b.add(
            format!("conv {xs:?} {fs:?} {a:?}"),
            Op::Conv(a),
            vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
        );
        let size = vec![1, 1, 1 + r.below(3), 1 + r.below(3)];
        let w = WindowAttrs {
            size,
            border: [Border::Constant, Border::Ignore, Border::Replicate][r.below(3)],
            padding: Vec::new(),
            stride: vec![1, 1, 2, 2],
            dilation: Vec::new(),
            output_shape: Vec::new(),
        };
        let ps = [1, 2, 1 + 2 * r.below(4), 3 + 2 * r.below(3)];
        let xp = r.tensor(DType::F32, &ps, -1.0, 1.0);
        b.add(format!("max_pool {w:?}"), Op::MaxPool(w), vec![Arg::In(xp)]);
    }
    assert!(b.len() >= 30, "{} valid cases", b.len());
    b.check_with(&BackendOptions {
        self_contained: Some(true),
        ..opts("rsc")
    });
}
