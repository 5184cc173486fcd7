//! Lane-panel GEMMs (`APacking::Lanes16`, chosen by `select::linalg::a_packing`) against
//! the reference interpreter: 1×1 and im2col convolutions, grouped and batched, with odd
//! channel counts, fused residual and clamp, matmuls with a constant (also transposed)
//! A, and linear layers of one row (`select::linalg::linear` transposes them). Natively they must take the lane path when the host has AVX-512 (the
//! kernel dump says `packed=lanes16`), and the same graphs compiled for a target without
//! AVX-512 or self-contained must take 6-row panels and give the same results.

use super::harness::{Rng, assert_close, load, opts};
use super::window::{Arg, Batch};
use crate::back::BackendOptions;
use crate::ir::{BinaryOp, Border, ConvAttrs, DType, Graph, Op, Tensor, TensorType};

fn conv(stride: usize, pad: usize, groups: usize) -> Op {
    Op::Conv(ConvAttrs {
        border: Border::Constant,
        padding: vec![(pad, pad); 2],
        stride: vec![stride; 2],
        dilation: vec![1; 2],
        groups,
        output_shape: Vec::new(),
    })
}

/// Convolutions and matmuls whose products the rule gives lane panels (each noted as
/// m × n × k), on shapes that are not multiples of the tiles.
fn lane_batch() -> Batch {
    let mut r = Rng::new(71);
    let mut b = Batch::new();
    // (batch, cin, cout, h, w, kernel, stride, pad, groups)
    let convs = [
        (1, 200, 50, 7, 7, 1, 1, 0, 1), // 50×49×200: 1×1, 50 rows (a partial panel)
        (2, 300, 33, 3, 3, 1, 1, 0, 1), // 33×9×300, two samples
        (1, 24, 40, 9, 9, 3, 2, 1, 1),  // 40×25×216: im2col, stride 2
        (1, 20, 28, 7, 7, 3, 1, 1, 1),  // 28×49×180: im2col (too few channels for Winograd)
        (1, 400, 60, 6, 6, 1, 1, 0, 2), // 30×36×200 per group (2–24 rows: the few-row route)
        (1, 700, 5, 4, 2, 1, 1, 0, 1),  // 5×8×700: fewer rows than a panel, 3 k blocks
        (1, 640, 70, 2, 1, 1, 1, 0, 1), // 70×2×640: two columns
    ];
    for (n, cin, cout, h, w, ks, stride, pad, groups) in convs {
        let x = r.tensor(DType::F32, &[n, cin, h, w], -1.0, 1.0);
        let f = r.tensor(DType::F32, &[cout, cin / groups, ks, ks], -1.0, 1.0);
        let bias = r.tensor(DType::F32, &[1, cout], -1.0, 1.0);
        assert!(b.add(
            format!("conv x[{n},{cin},{h},{w}] → {cout} k{ks} s{stride} p{pad} g{groups}"),
            conv(stride, pad, groups),
            vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
        ));
    }
    // matmul(A const, B input): 40×20×300, Aᵀ stored: 37×1×100, two k blocks: 17×5×257.
    for (m, n, k, ta) in [
        (40, 20, 300, false),
        (37, 1, 100, true),
        (17, 5, 257, false),
    ] {
        let a = r.tensor(DType::F32, &if ta { [k, m] } else { [m, k] }, -1.0, 1.0);
        let bt = r.tensor(DType::F32, &[k, n], -1.0, 1.0);
        assert!(b.add(
            format!("matmul {m}×{n}×{k} ta={ta}"),
            Op::MatMul {
                transpose_a: ta,
                transpose_b: false,
            },
            vec![Arg::Const(a), Arg::In(bt)],
        ));
    }
    // linear of one row against constant weights: yᵀ = W·xᵀ, 45×1×300 with a bias row
    // and 70×1×37 with a scalar bias (a partial panel each).
    for (n, k, bias) in [(45, 300, vec![1, 45]), (70, 37, vec![1, 1])] {
        let x = r.tensor(DType::F32, &[1, k], -1.0, 1.0);
        let w = r.tensor(DType::F32, &[n, k], -1.0, 1.0);
        let bias = r.tensor(DType::F32, &bias, -1.0, 1.0);
        assert!(b.add(
            format!("linear {n}×1×{k}"),
            Op::Linear,
            vec![Arg::In(x), Arg::Const(w), Arg::Const(bias)],
        ));
    }
    b
}

/// conv (1×1, 200 → 50 channels on 7×7) + residual add + clamp to [0, 6]: the chain the
/// epilogue fusion folds into the GEMM (accumulate, row bias, clamp).
fn fused_graph(r: &mut Rng) -> (Graph, Vec<Tensor>) {
    let mut g = Graph::new("lf");
    let xs = [1usize, 200, 7, 7];
    let ys = [1usize, 50, 7, 7];
    let x = g.add_input("x", TensorType::new(DType::F32, &xs));
    let res = g.add_input("res", TensorType::new(DType::F32, &ys));
    let f = g.add_const(
        r.tensor(DType::F32, &[50, 200, 1, 1], -0.2, 0.2),
        None,
        None,
    );
    let bias = g.add_const(r.tensor(DType::F32, &[1, 50], -1.0, 1.0), None, None);
    let lo = g.add_const(Tensor::f32(vec![], vec![0.0]), None, None);
    let hi = g.add_const(Tensor::f32(vec![], vec![6.0]), None, None);
    let node = |g: &mut Graph, op: Op, ins: Vec<crate::ir::ValueId>| {
        let tys: Vec<_> = ins.iter().map(|v| g.ty(*v).clone()).collect();
        let refs: Vec<_> = tys.iter().collect();
        let out = crate::ir::infer::infer(&op, &refs).expect("infer");
        g.add_node(op, ins, out)[0]
    };
    let c = node(&mut g, conv(1, 0, 1), vec![x, f, bias]);
    let s = node(&mut g, Op::Binary(BinaryOp::Add), vec![c, res]);
    let y = node(&mut g, Op::Clamp, vec![s, lo, hi]);
    g.outputs.push(y);
    let inputs = vec![
        r.tensor(DType::F32, &xs, -1.0, 1.0),
        r.tensor(DType::F32, &ys, -3.0, 3.0),
    ];
    (g, inputs)
}

/// The GEMM lines of the kernel dump with their A format.
fn gemm_lines(g: &Graph, o: &BackendOptions) -> Vec<String> {
    let plan = crate::passes::memory_plan::plan(g).expect("plan");
    let dump = crate::back::kernels(g, &plan, o)
        .expect("kernels")
        .to_string();
    dump.lines()
        .filter(|l| l.contains("gemm "))
        .map(str::to_string)
        .collect()
}

#[test]
fn lane_gemm_matches_interp_on_every_path() {
    let native = opts("lg");
    let avx512 = crate::back::object::target_has_avx512(&native).expect("host ISA");
    let lines = gemm_lines(&lane_batch().g, &native);
    assert_eq!(lines.len(), 12, "{lines:#?}");
    for l in &lines {
        assert_eq!(l.contains("packed=lanes16"), avx512, "{l}");
    }
    lane_batch().check_with(&native);

    // The same graphs without AVX-512 in the target, and self-contained: 6-row panels.
    let mut no_avx512 = opts("lgv2");
    no_avx512.target = Some(target_lexicon::Triple::host().to_string());
    assert!(!crate::back::object::target_has_avx512(&no_avx512).expect("ISA"));
    let self_contained = BackendOptions {
        self_contained: Some(true),
        ..opts("lgsc")
    };
    for o in [&no_avx512, &self_contained] {
        let lines = gemm_lines(&lane_batch().g, o);
        assert!(!lines.is_empty());
        assert!(lines.iter().all(|l| !l.contains("lanes16")), "{lines:#?}");
        lane_batch().check_with(o);
    }
}

#[test]
fn lane_gemm_fused_residual_and_clamp() {
    let mut r = Rng::new(72);
    let (g, inputs) = fused_graph(&mut r);
    let o = opts("lgf");
    let avx512 = crate::back::object::target_has_avx512(&o).expect("host ISA");
    let art = crate::back::compile(&g, &o).expect("compile");
    assert!(art.kernels.contains("accumulate=true"), "{}", art.kernels);
    assert_eq!(
        art.kernels.contains("packed=lanes16"),
        avx512,
        "{}",
        art.kernels
    );
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");
    let got = load(&g, &o).run(&inputs).expect("status 0");
    assert_close("fused lane conv", &got[0], &want[0]);
}

/// A classifier's tail: a 160→640 1×1 conv on 7×7 (a lane-panel GEMM), a mean over the
/// map, and a 640→512 linear layer (1.3 MB of weights, one column). The conv prefetches
/// the linear layer's matrix (`select::prefetch`: the dump shows it on the conv's line
/// when the host takes lane panels, and nowhere on a target without AVX-512), and the
/// results match the interpreter either way, serial and on the harness's workers.
#[test]
fn lane_gemm_prefetches_the_classifier_weights() {
    use crate::ir::ReduceOp;
    let mut r = Rng::new(73);
    let mut g = Graph::new("pfw");
    let x = g.add_input("x", TensorType::new(DType::F32, &[1, 160, 7, 7]));
    let node = |g: &mut Graph, op: Op, ins: Vec<crate::ir::ValueId>| {
        let tys: Vec<_> = ins.iter().map(|v| g.ty(*v).clone()).collect();
        let refs: Vec<_> = tys.iter().collect();
        let out = crate::ir::infer::infer(&op, &refs).expect("infer");
        g.add_node(op, ins, out)[0]
    };
    let f = g.add_const(
        r.tensor(DType::F32, &[640, 160, 1, 1], -0.1, 0.1),
        None,
        None,
    );
    let b = g.add_const(r.tensor(DType::F32, &[1, 640], -1.0, 1.0), None, None);
    let w = g.add_const(r.tensor(DType::F32, &[512, 640], -0.1, 0.1), None, None);
    let wb = g.add_const(r.tensor(DType::F32, &[1, 512], -1.0, 1.0), None, None);
    let c = node(&mut g, conv(1, 0, 1), vec![x, f, b]);
    let reduce = Op::Reduce {
        op: ReduceOp::Mean,
        axes: vec![2, 3],
    };
    let m = node(&mut g, reduce, vec![c]);
    let flat = Op::Reshape {
        shape: vec![0, -1],
        axis_start: 0,
        axis_count: -1,
    };
    let v = node(&mut g, flat, vec![m]);
    let y = node(&mut g, Op::Linear, vec![v, w, wb]);
    g.outputs.push(y);
    let inputs = vec![r.tensor(DType::F32, &[1, 160, 7, 7], -1.0, 1.0)];
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");

    let native = opts("pfw");
    let avx512 = crate::back::object::target_has_avx512(&native).expect("host ISA");
    let mut no_avx512 = opts("pfwv2");
    no_avx512.target = Some(target_lexicon::Triple::host().to_string());
    for (o, lanes) in [(&native, avx512), (&no_avx512, false)] {
        let lines = gemm_lines(&g, o);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        let pf = lines
            .iter()
            .map(|l| l.contains(" prefetch b"))
            .collect::<Vec<_>>();
        assert_eq!(pf, [lanes, false], "{lines:#?}");
        if lanes {
            // The matrix the conv prefetches is the linear layer's A, all of it.
            let a = lines[1]
                .split(" = ")
                .nth(1)
                .and_then(|s| s.split('[').next());
            assert!(
                lines[0].contains(&format!(" prefetch {}[327680]", a.unwrap_or("?"))),
                "{lines:#?}"
            );
        }
        // Serial, and with the harness's fake pool (the same bits).
        let got = load(&g, o).run(&inputs).expect("status 0");
        assert_close("classifier tail", &got[0], &want[0]);
    }
}
