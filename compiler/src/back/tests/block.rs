//! Inverted-residual blocks (`passes::block`, `select::block`): random blocks, with 1×1,
//! direct-conv and no expansions, against the interpreter on every lowering (the runtime's banded call where the target has
//! AVX-512, the three convs with the maps in scratch on a target without it, tiled GEMMs
//! in a self-contained object), and the chains that must stay layer by layer.

use super::harness::{Rng, assert_close, load, opts};
use crate::ir::infer::infer;
use crate::ir::{BinaryOp, Border, ConvAttrs, DType, Graph, Op, Tensor, UnaryOp, ValueId};

fn node(g: &mut Graph, op: Op, ins: &[ValueId]) -> ValueId {
    let tys: Vec<_> = ins.iter().map(|v| g.ty(*v).clone()).collect();
    let refs: Vec<_> = tys.iter().collect();
    let out = infer(&op, &refs).unwrap_or_else(|e| panic!("infer: {e}"));
    g.add_node(op, ins.to_vec(), out)[0]
}

/// `conv(x)` with a random `[cout, cin_g, k, k]` filter and bias of `cout` values;
/// `groups` 0 is depthwise.
#[allow(clippy::too_many_arguments)]
fn conv(
    g: &mut Graph,
    r: &mut Rng,
    x: ValueId,
    [cout, cin_g, k]: [usize; 3],
    groups: usize,
    stride: usize,
    dilation: usize,
    padding: Vec<(usize, usize)>,
) -> ValueId {
    let f = g.add_const(
        r.tensor(DType::F32, &[cout, cin_g, k, k], -0.5, 0.5),
        None,
        None,
    );
    let b = g.add_const(r.tensor(DType::F32, &[1, cout], -0.5, 0.5), None, None);
    let a = ConvAttrs {
        border: Border::Constant,
        padding,
        stride: vec![stride, stride],
        dilation: vec![dilation, dilation],
        groups,
        output_shape: Vec::new(),
    };
    node(g, Op::Conv(a), &[x, f, b])
}

/// The activation `which` (0 none, 1 relu, 2 clamp(0, 6), 3 clamp(−0.3, 0.4)) after `v`.
fn activation(g: &mut Graph, v: ValueId, which: usize) -> ValueId {
    let scalar = |g: &mut Graph, x: f32| g.add_const(Tensor::f32(vec![], vec![x]), None, None);
    match which {
        1 => node(g, Op::Unary(UnaryOp::Relu), &[v]),
        2 | 3 => {
            let (lo, hi) = if which == 2 { (0.0, 6.0) } else { (-0.3, 0.4) };
            let (l, h) = (scalar(g, lo), scalar(g, hi));
            node(g, Op::Clamp, &[v, l, h])
        }
        _ => v,
    }
}

/// One block's shape: input `[n, cin, h, w]`, `mid` and `cout` channels, a `k × k`
/// depthwise window with stride, dilation and padding (empty: automatic), activations,
/// and the residual: 0 none, 1 the block's input, 2 another graph input.
struct Shape {
    n: usize,
    cin: usize,
    mid: usize,
    cout: usize,
    hw: [usize; 2],
    k: usize,
    stride: usize,
    dilation: usize,
    padding: Vec<(usize, usize)>,
    acts: [usize; 3],
    residual: usize,
    /// Whether the block starts with a 1×1 expansion (else at its depthwise conv, on
    /// `cin` channels).
    expand: bool,
    /// A direct-conv expansion instead: its `k × k` window and stride (automatic
    /// padding).
    direct: Option<[usize; 2]>,
}

/// The graph of block `s` (input `x`, and `r` when the residual is another input), its
/// inputs, and the expected outputs.
fn block_graph(s: &Shape, seed: u64) -> (Graph, Vec<Tensor>) {
    let mut r = Rng::new(seed);
    let mut g = Graph::new("blk");
    let xt = r.tensor(DType::F32, &[s.n, s.cin, s.hw[0], s.hw[1]], -1.0, 1.0);
    let x = g.add_input("x", xt.ty());
    let mut inputs = vec![xt];
    let (e, mid) = if let Some([k, stride]) = s.direct {
        let e = conv(
            &mut g,
            &mut r,
            x,
            [s.mid, s.cin, k],
            1,
            stride,
            1,
            Vec::new(),
        );
        (activation(&mut g, e, s.acts[0]), s.mid)
    } else if s.expand {
        let e = conv(&mut g, &mut r, x, [s.mid, s.cin, 1], 1, 1, 1, Vec::new());
        (activation(&mut g, e, s.acts[0]), s.mid)
    } else {
        (x, s.cin)
    };
    let d = conv(
        &mut g,
        &mut r,
        e,
        [mid, 1, s.k],
        0,
        s.stride,
        s.dilation,
        s.padding.clone(),
    );
    let d = activation(&mut g, d, s.acts[1]);
    let p = conv(&mut g, &mut r, d, [s.cout, mid, 1], 1, 1, 1, Vec::new());
    let res = match s.residual {
        1 => Some(x),
        2 => {
            let rt = r.tensor(DType::F32, &g.ty(p).shape().expect("shape"), -1.0, 1.0);
            let rv = g.add_input("r", rt.ty());
            inputs.push(rt);
            Some(rv)
        }
        _ => None,
    };
    let p = match res {
        Some(rv) => node(&mut g, Op::Binary(BinaryOp::Add), &[p, rv]),
        None => p,
    };
    let y = activation(&mut g, p, s.acts[2]);
    g.outputs.push(y);
    (g, inputs)
}

/// Random blocks (odd channel counts, strides 1 and 2, 3×3 and 5×5 windows, dilation,
/// explicit padding, every activation, residuals that are the block's input or another
/// value, two samples, blocks without an expansion, and expansions by a direct conv of
/// 3×3, 5×5 and 7×7 at strides 1 and 2 from 1–5 channels): one `inverted_residual`
/// step on AVX-512 targets, the three convs elsewhere, and the interpreter's result on
/// every lowering; the harness also runs each through a reverse-order pool of three
/// workers and wants the same bits.
#[test]
fn inverted_residual_blocks_match_the_interpreter() {
    let mut r = Rng::new(41);
    let avx512 = crate::back::object::target_has_avx512(&opts("probe")).expect("target");
    for case in 0..11 {
        // Cases 8–10 expand by a direct conv (`epilogue::few_channels`: at most 4
        // channels at stride 2, 16 at stride 1).
        let direct = (case >= 8).then(|| [[3, 2], [7, 1], [5, 2]][case - 8]);
        let ds = direct.map_or(1, |d| d[1]);
        let stride = 1 + case % 2;
        let k = if case % 4 == 3 { 5 } else { 3 };
        let dilation = if case == 5 { 2 } else { 1 };
        let residual = if stride == 1 && direct.is_none() {
            case / 2 % 3
        } else {
            0
        };
        let cin = match direct {
            Some(_) => [3, 5, 1][case - 8],
            None => 3 + (r.next() % 20) as usize,
        };
        let s = Shape {
            n: 1 + case % 3 / 2,
            cin,
            mid: 5 + (r.next() % 60) as usize,
            // A residual that is the input keeps its channels.
            cout: if residual == 1 {
                cin
            } else {
                1 + (r.next() % 30) as usize
            },
            hw: [
                (28 * stride + (r.next() % 9) as usize) * ds,
                (5 + (r.next() % 40) as usize) * ds,
            ],
            k,
            stride,
            dilation,
            padding: if case == 6 {
                vec![(2, 0), (1, 1)]
            } else {
                Vec::new()
            },
            acts: [case % 4, (case + 2) % 4, (case + 1) % 4],
            residual,
            expand: case % 4 != 2,
            direct,
        };
        let (g, inputs) = block_graph(&s, 100 + case as u64);
        let want = crate::ir::interp::run(&g, &inputs).expect("interp");
        let native = opts("blkn");
        let mut loops = opts("blkl");
        loops.target = Some(target_lexicon::Triple::host().to_string());
        let tiled = super::gemm::self_contained("blks");
        for (which, o) in [native, loops, tiled].into_iter().enumerate() {
            let m = load(&g, &o);
            let kd = &m.art.kernels;
            let banded = kd.matches("inverted_residual ").count();
            assert_eq!(
                banded,
                usize::from(which == 0 && avx512),
                "case {case}: {kd}"
            );
            assert_eq!(
                kd.contains(": direct b"),
                banded == 1 && direct.is_some(),
                "case {case}: {kd}"
            );
            let got = m.run(&inputs).expect("status 0");
            assert_close(&format!("case {case}, lowering {which}"), &got[0], &want[0]);
        }
    }
}

/// Chains that are not blocks stay layer by layer: an expanded map that is also a graph
/// output (the depthwise conv and the projection still make a block without an
/// expansion), a depthwise map that is a graph output, and a block whose output has fewer
/// rows than `passes::block::MIN_OUTPUT_ROWS`.
#[test]
fn non_blocks_stay_layer_by_layer() {
    let avx512 = crate::back::object::target_has_avx512(&opts("probe")).expect("target");
    let base = |hw: [usize; 2]| Shape {
        n: 1,
        cin: 8,
        mid: 24,
        cout: 8,
        hw,
        k: 3,
        stride: 1,
        dilation: 1,
        padding: Vec::new(),
        acts: [2, 2, 0],
        residual: 1,
        expand: true,
        direct: None,
    };
    let mut cases = Vec::new();
    // The expanded map (after its clamp) also goes out.
    let (mut g, inputs) = block_graph(&base([16, 16]), 7);
    let users = g.users();
    let exp = crate::passes::block::blocks(&g, &users)[0].expanded;
    g.outputs.push(exp.expect("an expansion"));
    cases.push((g, inputs));
    // The depthwise map goes out.
    let (mut g, inputs) = block_graph(&base([16, 16]), 8);
    let users = g.users();
    let d = crate::passes::block::blocks(&g, &users)[0].dw_out;
    g.outputs.push(d);
    cases.push((g, inputs));
    // 13 output rows.
    cases.push(block_graph(&base([13, 30]), 9));
    for (i, (g, inputs)) in cases.into_iter().enumerate() {
        let users = g.users();
        let found = crate::passes::block::blocks(&g, &users);
        let want = crate::ir::interp::run(&g, &inputs).expect("interp");
        let m = load(&g, &opts("nblk"));
        let k = &m.art.kernels;
        if i == 0 {
            assert!(found.len() == 1 && found[0].expand.is_none(), "{found:?}");
            if avx512 {
                assert!(
                    k.contains("inverted_residual") && !k.contains("expand to"),
                    "{k}"
                );
            }
        } else {
            assert!(found.is_empty(), "case {i}: {found:?}");
            assert!(!k.contains("inverted_residual"), "case {i}");
            if avx512 {
                assert!(k.contains("dwconv "), "case {i}");
            }
        }
        let got = m.run(&inputs).expect("status 0");
        for (a, b) in got.iter().zip(&want) {
            assert_close(&format!("case {i}"), a, b);
        }
    }
}
