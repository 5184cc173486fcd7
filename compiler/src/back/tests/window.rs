//! Differential tests of the sliding-window ops: many random cases (seeded) are put side
//! by side into one graph (one compile + link per batch), then compared with `ir::interp`.
//! Cases whose attributes `ir::infer` rejects are skipped (they are not valid graphs).

use super::harness::{Rng, assert_close, load, opts};
use crate::ir::infer::infer;
use crate::ir::{Border, ConvAttrs, DType, Graph, Op, Tensor, WindowAttrs};

/// Uniform integers for the case generators.
pub(super) trait Below {
    fn below(&mut self, n: usize) -> usize;
}
impl Below for Rng {
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One operand: a runtime input or a constant baked into the object.
pub(super) enum Arg {
    In(Tensor),
    Const(Tensor),
}

/// Cases for one graph: each is an op and its operands.
#[derive(Clone, Default)]
pub(super) struct Batch {
    pub g: Graph,
    inputs: Vec<Tensor>,
    what: Vec<String>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch {
            g: Graph::new("w"),
            ..Batch::default()
        }
    }
    /// Adds `op(args)`; returns false (adding nothing) when `ir::infer` rejects it.
    pub fn add(&mut self, what: String, op: Op, args: Vec<Arg>) -> bool {
        let tys: Vec<_> = args
            .iter()
            .map(|a| match a {
                Arg::In(t) | Arg::Const(t) => t.ty(),
            })
            .collect();
        let refs: Vec<_> = tys.iter().collect();
        let Ok(out) = infer(&op, &refs) else {
            return false;
        };
        if out.iter().any(|t| t.shape().is_none_or(|s| s.contains(&0))) {
            return false;
        }
        let mut vals = Vec::new();
        for a in args {
            vals.push(match a {
                Arg::In(t) => {
                    let name = format!("i{}", self.inputs.len());
                    let v = self.g.add_input(name, t.ty());
                    self.inputs.push(t);
                    v
                }
                Arg::Const(t) => self.g.add_const(t, None, None),
            });
        }
        let outs = self.g.add_node(op, vals, out);
        self.g.outputs.extend(outs);
        self.what.push(what);
        true
    }
    pub fn len(&self) -> usize {
        self.what.len()
    }
    /// Compiles, runs and compares every output.
    pub fn check(self, prefix: &str) {
        self.check_with(&opts(prefix))
    }
    pub fn check_with(self, o: &crate::back::BackendOptions) {
        if self.g.outputs.is_empty() {
            return;
        }
        let want =
            crate::ir::interp::run(&self.g, &self.inputs).unwrap_or_else(|e| panic!("interp: {e}"));
        let m = load(&self.g, o);
        let got = m.run(&self.inputs).expect("status 0");
        for (i, (gt, wt)) in got.iter().zip(&want).enumerate() {
            let what = self
                .what
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("output {i}"));
            assert_close(&what, gt, wt);
        }
    }
}

fn border(r: &mut Rng, all: bool) -> Border {
    let b = [
        Border::Constant,
        Border::Ignore,
        Border::Replicate,
        Border::Reflect,
        Border::ReflectEven,
    ];
    if all { b[r.below(5)] } else { b[r.below(2)] }
}

fn window(r: &mut Rng, rank: usize, all_borders: bool) -> WindowAttrs {
    let mut size = vec![1, 1];
    let mut stride = vec![1, 1];
    let mut dilation = vec![1, 1];
    let mut padding = vec![(0, 0), (0, 0)];
    for _ in 2..rank {
        size.push(1 + r.below(4));
        stride.push(1 + r.below(2));
        dilation.push(if r.below(4) == 0 { 2 } else { 1 });
        padding.push((r.below(3), r.below(3)));
    }
    let auto = r.below(3) == 0;
    WindowAttrs {
        size,
        border: border(r, all_borders),
        padding: if auto { Vec::new() } else { padding },
        stride,
        dilation,
        output_shape: Vec::new(),
    }
}

fn spatial(r: &mut Rng, rank: usize) -> Vec<usize> {
    let mut s = vec![1 + r.below(2), 1 + r.below(3)];
    for _ in 2..rank {
        s.push(1 + r.below(9));
    }
    s
}

#[test]
fn pools_random() {
    let mut r = Rng::new(11);
    let mut b = Batch::new();
    let mut tries = 0;
    while b.len() < 48 && tries < 1000 {
        tries += 1;
        let rank = 3 + r.below(2);
        let shape = spatial(&mut r, rank);
        let w = window(&mut r, rank, true);
        let x = r.tensor(DType::F32, &shape, -2.0, 2.0);
        let (op, name) = match r.below(4) {
            0 => (Op::MaxPool(w.clone()), "max_pool"),
            1 => (
                Op::Box {
                    window: w.clone(),
                    normalize: true,
                },
                "avg",
            ),
            2 => (
                Op::Box {
                    window: w.clone(),
                    normalize: false,
                },
                "box",
            ),
            _ => (Op::ArgmaxPool(w.clone()), "argmax_pool"),
        };
        b.add(format!("{name} {shape:?} {w:?}"), op, vec![Arg::In(x)]);
    }
    assert!(b.len() >= 30, "only {} valid cases", b.len());
    b.check("pools");
}

#[test]
fn big_windows_use_reductions() {
    let mut r = Rng::new(5);
    let mut b = Batch::new();
    for border in [Border::Constant, Border::Ignore] {
        let w = WindowAttrs {
            size: vec![1, 1, 7, 7],
            border,
            padding: vec![(0, 0), (0, 0), (1, 2), (3, 0)],
            stride: vec![1, 1, 1, 2],
            dilation: Vec::new(),
            output_shape: Vec::new(),
        };
        let x = r.tensor(DType::F32, &[2, 3, 9, 11], -1.0, 1.0);
        b.add(
            format!("avg {border:?}"),
            Op::Box {
                window: w.clone(),
                normalize: true,
            },
            vec![Arg::In(x.clone())],
        );
        b.add(
            format!("max {border:?}"),
            Op::MaxPool(w.clone()),
            vec![Arg::In(x.clone())],
        );
        b.add(
            format!("argmax {border:?}"),
            Op::ArgmaxPool(w),
            vec![Arg::In(x)],
        );
    }
    b.check("bigwin");
}

#[test]
fn sample_desample_debox_random() {
    let mut r = Rng::new(21);
    let mut b = Batch::new();
    let mut tries = 0;
    while b.len() < 36 && tries < 2000 {
        tries += 1;
        let rank = 3 + r.below(2);
        let shape = spatial(&mut r, rank);
        let w = window(&mut r, rank, false);
        let Ok(out) = infer(
            &Op::ArgmaxPool(w.clone()),
            &[&crate::ir::TensorType::new(DType::F32, &shape)],
        ) else {
            continue;
        };
        let Some(os) = out[0].shape() else { continue };
        if os.contains(&0) {
            continue;
        }
        let vol: usize = w.size.iter().product();
        let idx = Tensor::i32(
            os.clone(),
            (0..os.iter().product::<usize>())
                .map(|_| r.below(vol) as i32)
                .collect(),
        );
        let x = r.tensor(DType::F32, &shape, -2.0, 2.0);
        let y = r.tensor(DType::F32, &os, -2.0, 2.0);
        match r.below(3) {
            0 => b.add(
                format!("sample {shape:?} {w:?}"),
                Op::Sample(w.clone()),
                vec![Arg::In(x), Arg::In(idx)],
            ),
            1 => {
                let mut w2 = w.clone();
                if r.below(2) == 0 {
                    w2.output_shape = shape.clone();
                }
                b.add(
                    format!("desample {os:?} {w2:?}"),
                    Op::Desample(w2),
                    vec![Arg::In(y), Arg::In(idx)],
                )
            }
            _ => {
                let mut w2 = w.clone();
                if r.below(2) == 0 {
                    w2.output_shape = shape.clone();
                }
                let norm = r.below(2) == 0;
                b.add(
                    format!("debox({norm}) {os:?} {w2:?}"),
                    Op::Debox {
                        window: w2,
                        normalize: norm,
                    },
                    vec![Arg::In(y)],
                )
            }
        };
    }
    assert!(b.len() >= 20, "only {} valid cases", b.len());
    b.check("sdd");
}

pub(super) fn conv_attrs(r: &mut Rng, sp: usize, all_borders: bool) -> ConvAttrs {
    let auto = r.below(3) == 0;
    ConvAttrs {
        border: border(r, all_borders),
        padding: if auto {
            Vec::new()
        } else {
            (0..sp).map(|_| (r.below(3), r.below(3))).collect()
        },
        stride: (0..sp).map(|_| 1 + r.below(2)).collect(),
        dilation: (0..sp)
            .map(|_| if r.below(4) == 0 { 2 } else { 1 })
            .collect(),
        groups: 1,
        output_shape: Vec::new(),
    }
}

#[test]
fn conv_random() {
    let mut r = Rng::new(3);
    let mut b = Batch::new();
    let mut tries = 0;
    while b.len() < 40 && tries < 2000 {
        tries += 1;
        let sp = 1 + r.below(2);
        let mut a = conv_attrs(&mut r, sp, true);
        let groups = [1, 1, 2, 0][r.below(4)];
        a.groups = groups;
        let n = 1 + r.below(2);
        let gc = if groups == 0 {
            1 + r.below(4)
        } else {
            groups.max(1)
        };
        let cg = if groups == 0 { 1 } else { 1 + r.below(3) };
        let c = gc * cg;
        let og = 1 + r.below(3);
        let cout = if groups == 0 { c * og } else { gc * og };
        let mut xs = vec![n, c];
        let mut fs = vec![cout, cg];
        for _ in 0..sp {
            xs.push(1 + r.below(9));
            fs.push(1 + r.below(3));
        }
        let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
        let f = r.tensor(DType::F32, &fs, -1.0, 1.0);
        let bias = if r.below(2) == 0 {
            r.tensor(DType::F32, &[1, cout], -1.0, 1.0)
        } else {
            r.tensor(DType::F32, &[], -1.0, 1.0)
        };
        b.add(
            format!("conv x{xs:?} f{fs:?} {a:?}"),
            Op::Conv(a),
            vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
        );
    }
    assert!(b.len() >= 30, "only {} valid cases", b.len());
    b.check("convr");
}

/// Depthwise convs strided along the innermost dim (stride 2 reads vectorize as
/// even-lane gathers, stride 3 stays scalar): dilation, padding, 1-d and 2-d.
#[test]
fn depthwise_strided_random() {
    let mut r = Rng::new(11);
    let mut b = Batch::new();
    let mut tries = 0;
    while b.len() < 30 && tries < 2000 {
        tries += 1;
        let sp = 1 + r.below(2);
        let mut a = conv_attrs(&mut r, sp, false);
        a.border = [Border::Constant, Border::Ignore][r.below(2)];
        a.groups = 0;
        if let Some(s) = a.stride.last_mut() {
            *s = 2 + r.below(2);
        }
        let (n, c) = (1 + r.below(2), 1 + r.below(5));
        let mut xs = vec![n, c];
        let mut fs = vec![c, 1];
        for _ in 0..sp {
            xs.push(1 + r.below(15));
            fs.push(1 + r.below(4));
        }
        let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
        let f = r.tensor(DType::F32, &fs, -1.0, 1.0);
        let bias = r.tensor(DType::F32, &[1, c], -1.0, 1.0);
        b.add(
            format!("dwconv x{xs:?} f{fs:?} {a:?}"),
            Op::Conv(a),
            vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
        );
    }
    assert!(b.len() >= 20, "only {} valid cases", b.len());
    b.check("dwsr");
}

/// 3×3 stride-1 convs big enough for the Winograd F(2×2, 3×3) path: odd and even
/// sizes, batch 2, symmetric/asymmetric/no padding, constant and ignore borders, tap
/// products in 6-row and (on AVX-512 hosts) lane panels.
#[test]
fn winograd_random() {
    let mut r = Rng::new(21);
    let mut b = Batch::new();
    for case in 0..12 {
        let sp = 2;
        let mut a = conv_attrs(&mut r, sp, false);
        a.border = [Border::Constant, Border::Ignore][r.below(2)];
        a.stride = vec![1, 1];
        a.dilation = vec![1, 1];
        a.padding = match case % 4 {
            0 => vec![(1, 1), (1, 1)],
            1 => Vec::new(),
            2 => vec![(0, 0), (0, 0)],
            _ => vec![(0, 2), (2, 1)],
        };
        // Odd cases have more than 24 filters: their tap products take lane panels on
        // an AVX-512 host (the others the few-row route).
        let cout = if case % 2 == 0 {
            16 + r.below(9)
        } else {
            33 + r.below(8)
        };
        // Every third case has 16–19 input channels: Winograd only with the runtime's
        // transforms (AVX-512 hosts), else the direct kernel or im2col + GEMM.
        let cin = if case % 3 == 2 {
            16 + r.below(4)
        } else {
            64 + r.below(5)
        };
        let n = 1 + r.below(2);
        // The last four take larger maps: F(4×4) tiles on AVX-512 hosts.
        let (h, w) = if case < 8 {
            (7 + r.below(8), 7 + r.below(8))
        } else {
            (22 + r.below(16), 22 + r.below(16))
        };
        let xs = vec![n, cin, h, w];
        let fs = vec![cout, cin, 3, 3];
        let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
        let f = r.tensor(DType::F32, &fs, -1.0, 1.0);
        let bias = r.tensor(DType::F32, &[1, cout], -1.0, 1.0);
        b.add(
            format!("wino x{xs:?} f{fs:?} {a:?}"),
            Op::Conv(a),
            vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
        );
    }
    assert!(b.len() == 12, "only {} valid cases", b.len());
    b.check("wino");
    // The path is really taken: fused conv → relu as transform kernels + one batched GEMM.
    let mut g = Graph::new("wino1");
    let xt = r.tensor(DType::F32, &[1, 64, 12, 11], -1.0, 1.0);
    let x = g.add_input("x", xt.ty());
    let f = g.add_const(r.tensor(DType::F32, &[40, 64, 3, 3], -1.0, 1.0), None, None);
    let bias = g.add_const(r.tensor(DType::F32, &[1, 40], -1.0, 1.0), None, None);
    let c = node(&mut g, Op::Conv(ConvAttrs::default()), &[x, f, bias]);
    let y = node(&mut g, Op::Unary(crate::ir::UnaryOp::Relu), &[c]);
    g.outputs.push(y);
    let inputs = [xt];
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");
    let m = load(&g, &opts("wino1"));
    let k = &m.art.kernels;
    assert!(
        (k.contains("_wino_in\n") || k.contains("winograd_in b")) && k.contains("batches=16"),
        "{k}"
    );
    if crate::back::object::target_has_avx512(&opts("wino1")).expect("host") {
        // The input transform: one call of the runtime's kernel, which reads the zero
        // padding itself (no padded copy, no border fills).
        assert!(
            k.contains("winograd_in b") && !k.contains("_wino_in\n"),
            "{k}"
        );
        assert!(
            k.contains("pad=(1,1) None") && !k.contains("_pad_copy") && !k.contains("_pad_fill"),
            "{k}"
        );
        // 40 filters over 30 tiles: lane panels (see `linalg::lanes_pay`).
        assert!(k.contains("packed=lanes16"), "{k}");
    }
    assert!(!k.contains("_relu\n"), "{k}");
    let got = m.run(&inputs).expect("status 0");
    assert_close("wino1", &got[0], &want[0]);
    // conv → add residual → clamp, odd output extents, 16 input channels: the epilogue
    // fused into the output transform (the runtime's, on AVX-512 hosts).
    let (g, inputs) = residual_conv(&mut r, "wino2", [2, 16, 13, 9], 24, [(1, 1), (1, 1)], true);
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");
    let m = load(&g, &opts("wino2"));
    let k = &m.art.kernels;
    if crate::back::object::target_has_avx512(&opts("wino2")).expect("host") {
        assert!(
            k.contains("winograd_in b")
                && k.lines().any(|l| l.starts_with("winograd_out b")
                    && l.contains(" residual=b")
                    && l.contains("Clamp(-0.75, 0.5)")),
            "{k}"
        );
    }
    let got = m.run(&inputs).expect("status 0");
    assert_close("wino2", &got[0], &want[0]);
    // A 15×14 map (4 × 4 F(4×4) tiles, the last ones cut: one vector of 16 tiles a plane,
    // which the output transform takes across rows), asymmetric padding, residual and
    // relu: F(4×4) transforms and 36 products on AVX-512 hosts.
    let (g, inputs) = residual_conv(
        &mut r,
        "wino3",
        [1, 32, 15, 14],
        48,
        [(2, 0), (1, 1)],
        false,
    );
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");
    let m = load(&g, &opts("wino3"));
    let k = &m.art.kernels;
    if crate::back::object::target_has_avx512(&opts("wino3")).expect("host") {
        assert!(
            k.contains("tiles 6x6 stride=(4,4)")
                && k.contains("batches=36")
                && k.lines().any(|l| l.starts_with("winograd_out b")
                    && l.contains("tiles 4x4")
                    && l.contains(" residual=b")
                    && l.contains("Relu")),
            "{k}"
        );
    }
    let got = m.run(&inputs).expect("status 0");
    assert_close("wino3", &got[0], &want[0]);
    // A 50×53 map (14 tiles a row): the F(4×4) products fused with the output transform,
    // residual and clamp included, on AVX-512 hosts, both transforms and the products
    // band by band of tile rows (`nnefc_winograd_banded`).
    let (g, inputs) = residual_conv(&mut r, "wino4", [2, 24, 50, 53], 40, [(1, 1), (1, 1)], true);
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");
    let m = load(&g, &opts("wino4"));
    let k = &m.art.kernels;
    if crate::back::object::target_has_avx512(&opts("wino4")).expect("host") {
        assert!(
            !k.contains("batches=36")
                && !k.contains("winograd_in ")
                && k.lines().any(|l| l.starts_with("winograd_banded b")
                    && l.contains("from 24 channels")
                    && l.contains("in bands of 2 tile rows (input pad=(1,1))")
                    && l.contains(" residual=b")
                    && l.contains("Clamp(-0.75, 0.5)")),
            "{k}"
        );
    }
    let got = m.run(&inputs).expect("status 0");
    assert_close("wino4", &got[0], &want[0]);
    // Fused on maps of narrow tile rows: a 29×30 map (8 × 8 tiles, the last ones cut,
    // taken 16 at a time across rows) and a batch-2 26×27 one (7 tiles a row, taken in
    // pairs of rows), asymmetric padding and a residual, in bands; and a 10×50 map, too
    // few tile rows (3) for two bands, as the two calls.
    for (name, xs, clamp, op) in [
        ("wino5", [1, 32, 29, 30], false, "winograd_banded b"),
        ("wino6", [2, 20, 26, 27], true, "winograd_banded b"),
        ("wino7", [1, 16, 10, 50], true, "winograd_fused b"),
    ] {
        let (g, inputs) = residual_conv(&mut r, name, xs, 48, [(2, 0), (1, 1)], clamp);
        let want = crate::ir::interp::run(&g, &inputs).expect("interp");
        let m = load(&g, &opts(name));
        let k = &m.art.kernels;
        if crate::back::object::target_has_avx512(&opts(name)).expect("host") {
            assert!(
                !k.contains("batches=36")
                    && k.lines().any(|l| l.starts_with(op)
                        && l.contains(&format!("from {} channels", xs[1]))
                        && l.contains(" residual=b")),
                "{k}"
            );
        }
        let got = m.run(&inputs).expect("status 0");
        assert_close(name, &got[0], &want[0]);
    }
}

/// `act(conv3x3(x) + bias + r)` with random data: input `xs`, `cout` filters, the given
/// padding; `act` a clamp to [−0.75, 0.5] when `clamp`, else relu. Returns the graph and
/// its inputs `[x, r]`.
fn residual_conv(
    r: &mut Rng,
    name: &str,
    xs: [usize; 4],
    cout: usize,
    padding: [(usize, usize); 2],
    clamp: bool,
) -> (Graph, [Tensor; 2]) {
    let mut g = Graph::new(name);
    let xt = r.tensor(DType::F32, &xs, -1.0, 1.0);
    let rt = r.tensor(DType::F32, &[xs[0], cout, xs[2], xs[3]], -1.0, 1.0);
    let x = g.add_input("x", xt.ty());
    let res = g.add_input("r", rt.ty());
    let f = g.add_const(
        r.tensor(DType::F32, &[cout, xs[1], 3, 3], -1.0, 1.0),
        None,
        None,
    );
    let bias = g.add_const(r.tensor(DType::F32, &[1, cout], -1.0, 1.0), None, None);
    let a = ConvAttrs {
        padding: padding.to_vec(),
        ..Default::default()
    };
    let c = node(&mut g, Op::Conv(a), &[x, f, bias]);
    let s2 = node(&mut g, Op::Binary(crate::ir::BinaryOp::Add), &[c, res]);
    let y = if clamp {
        let lo = g.add_const(Tensor::f32(vec![], vec![-0.75]), None, None);
        let hi = g.add_const(Tensor::f32(vec![], vec![0.5]), None, None);
        node(&mut g, Op::Clamp, &[s2, lo, hi])
    } else {
        node(&mut g, Op::Unary(crate::ir::UnaryOp::Relu), &[s2])
    };
    g.outputs.push(y);
    (g, [xt, rt])
}

#[test]
fn deconv_random() {
    let mut r = Rng::new(4);
    let mut b = Batch::new();
    let mut tries = 0;
    while b.len() < 30 && tries < 2000 {
        tries += 1;
        let sp = 1 + r.below(2);
        let mut a = conv_attrs(&mut r, sp, false);
        let groups = [1, 1, 2][r.below(3)];
        a.groups = groups;
        let n = 1 + r.below(2);
        let cin = groups * (1 + r.below(2));
        let og = 1 + r.below(3);
        let mut xs = vec![n, cin];
        let mut fs = vec![cin, og];
        for _ in 0..sp {
            xs.push(1 + r.below(6));
            fs.push(1 + r.below(3));
        }
        if r.below(2) == 0 {
            // Ask for one more than the minimal extent where the stride allows it.
            let fwd = infer(
                &Op::Deconv(a.clone()),
                &[
                    &crate::ir::TensorType::new(DType::F32, &xs),
                    &crate::ir::TensorType::new(DType::F32, &fs),
                    &crate::ir::TensorType::new(DType::F32, &[]),
                ],
            );
            if let Ok(t) = fwd
                && let Some(mut s) = t[0].shape()
            {
                for (d, st) in a.stride.iter().enumerate() {
                    if *st > 1 {
                        s[2 + d] += 1;
                    }
                }
                a.output_shape = s;
            }
        }
        let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
        let f = r.tensor(DType::F32, &fs, -1.0, 1.0);
        let bias = r.tensor(DType::F32, &[1, groups * og], -1.0, 1.0);
        b.add(
            format!("deconv x{xs:?} f{fs:?} {a:?}"),
            Op::Deconv(a),
            vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
        );
    }
    assert!(b.len() >= 15, "only {} valid cases", b.len());
    b.check("deconvr");
}

/// Appends `op(ins)` with its inferred type.
fn node(g: &mut Graph, op: Op, ins: &[crate::ir::ValueId]) -> crate::ir::ValueId {
    let tys: Vec<_> = ins.iter().map(|v| g.ty(*v).clone()).collect();
    let refs: Vec<_> = tys.iter().collect();
    let out = infer(&op, &refs).unwrap_or_else(|e| panic!("infer: {e}"));
    g.add_node(op, ins.to_vec(), out)[0]
}

/// `conv(x)` with a random constant `[cout, cin_g, k, k]` filter (values within ±`fmax`)
/// and bias (within ±1): zero border, no padding, stride `stride` both ways, `groups`
/// groups (0: depthwise).
fn const_conv(
    g: &mut Graph,
    r: &mut Rng,
    x: crate::ir::ValueId,
    [cout, cin_g, k]: [usize; 3],
    groups: usize,
    stride: usize,
    fmax: f32,
) -> crate::ir::ValueId {
    let f = g.add_const(
        r.tensor(DType::F32, &[cout, cin_g, k, k], -fmax, fmax),
        None,
        None,
    );
    let b = g.add_const(r.tensor(DType::F32, &[1, cout], -1.0, 1.0), None, None);
    let a = ConvAttrs {
        border: Border::Constant,
        padding: Vec::new(),
        stride: vec![stride, stride],
        dilation: Vec::new(),
        groups,
        output_shape: Vec::new(),
    };
    node(g, Op::Conv(a), &[x, f, b])
}

/// conv → relu, conv → clamp, conv → add(residual) → relu, depthwise → clamp(0, 6):
/// each chain is one fused step (checked in the kernel dump) and matches the interpreter.
#[test]
fn fused_epilogues() {
    use crate::ir::{BinaryOp, UnaryOp};
    let mut r = Rng::new(8);
    let mut g = Graph::new("fuse");
    let xs = [2usize, 6, 7, 9];
    let xt = r.tensor(DType::F32, &xs, -1.0, 1.0);
    let x = g.add_input("x", xt.ty());
    let rt = r.tensor(DType::F32, &[2, 8, 7, 9], -1.0, 1.0);
    let res = g.add_input("r", rt.ty());
    let conv = |g: &mut Graph, r: &mut Rng, x, cout: usize, cin_g: usize, k: usize, groups| {
        const_conv(g, r, x, [cout, cin_g, k], groups, 1, 1.0)
    };
    let c1 = conv(&mut g, &mut r, x, 8, 6, 3, 1);
    let y1 = node(&mut g, Op::Unary(UnaryOp::Relu), &[c1]);
    let c2 = conv(&mut g, &mut r, x, 8, 6, 1, 1);
    let lo = g.add_const(Tensor::f32(vec![], vec![-0.5]), None, None);
    let hi = g.add_const(Tensor::f32(vec![], vec![0.5]), None, None);
    let y2 = node(&mut g, Op::Clamp, &[c2, lo, hi]);
    let c3 = conv(&mut g, &mut r, x, 8, 6, 3, 1);
    let s3 = node(&mut g, Op::Binary(BinaryOp::Add), &[c3, res]);
    let y3 = node(&mut g, Op::Unary(UnaryOp::Relu), &[s3]);
    let c4 = conv(&mut g, &mut r, x, 6, 1, 3, 0);
    let zero = g.add_const(Tensor::f32(vec![], vec![0.0]), None, None);
    let six = g.add_const(Tensor::f32(vec![], vec![0.3]), None, None);
    let y4 = node(&mut g, Op::Clamp, &[c4, zero, six]);
    // Depthwise stride 2 → clamp: fused, its stride-2 reads vectorized.
    let f5 = g.add_const(r.tensor(DType::F32, &[6, 1, 3, 3], -1.0, 1.0), None, None);
    let b5 = g.add_const(r.tensor(DType::F32, &[1, 6], -1.0, 1.0), None, None);
    let a5 = ConvAttrs {
        border: Border::Constant,
        padding: Vec::new(),
        stride: vec![2, 2],
        dilation: Vec::new(),
        groups: 0,
        output_shape: Vec::new(),
    };
    let c5 = node(&mut g, Op::Conv(a5), &[x, f5, b5]);
    let y5 = node(&mut g, Op::Clamp, &[c5, zero, six]);
    // Depthwise (split into border/interior regions) → add residual → relu.
    let r6t = r.tensor(DType::F32, &xs, -1.0, 1.0);
    let r6 = g.add_input("r6", r6t.ty());
    let c6 = conv(&mut g, &mut r, x, 6, 1, 3, 0);
    let s6 = node(&mut g, Op::Binary(BinaryOp::Add), &[r6, c6]);
    let y6 = node(&mut g, Op::Unary(UnaryOp::Relu), &[s6]);
    g.outputs.extend([y1, y2, y3, y4, y5, y6]);
    let inputs = [xt, rt, r6t];
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");
    let m = load(&g, &opts("fuse"));
    let k = &m.art.kernels;
    let direct: Vec<&str> = k
        .lines()
        .filter(|l| l.contains(" from 6 channels "))
        .collect();
    if direct.is_empty() {
        assert!(k.contains("activation=Relu accumulate=false"), "{k}");
        assert!(k.contains("activation=Relu accumulate=true"), "{k}");
    } else {
        // AVX-512 targets: the 3×3 convs of 6 channels take the runtime's direct kernel,
        // with the same epilogues.
        assert_eq!(direct.len(), 2, "{k}");
        assert!(direct.iter().any(|l| l.ends_with(") Relu parallel")), "{k}");
        assert!(
            direct
                .iter()
                .any(|l| l.contains(" residual=b") && l.ends_with(" Relu parallel")),
            "{k}"
        );
    }
    assert!(k.contains("activation=Clamp(-0.5, 0.5)"), "{k}");
    assert!(
        !k.contains("_relu\n") && !k.contains("_clamp\n") && !k.contains("_add\n"),
        "{k}"
    );
    let got = m.run(&inputs).expect("status 0");
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_close(&format!("chain {i}"), a, b);
    }
}

/// Swish (`mul(c, sigmoid(c))`, either operand order, and `silu`), hard swish (PyTorch's
/// and Keras' spellings) and sigmoid after every kind of
/// conv lowering: a 1×1 GEMM conv, a 3×3 direct conv of 6 channels, depthwise 3×3 and
/// 5×5 at stride 2, a Winograd-sized 3×3 conv after a residual add, and a conv whose
/// output has a third reader (not a chain: sigmoid and mul run alone). On the native
/// target (runtime kernels where it has AVX-512), a target without AVX-512 (loop nests)
/// and in a self-contained object (tiled GEMMs): each chain is folded (no sigmoid or mul kernel but the third reader's) and
/// every output matches the interpreter.
#[test]
fn fused_swish_and_sigmoid() {
    use crate::ir::{BinaryOp, UnaryOp};
    let mut r = Rng::new(12);
    let mut g = Graph::new("swish");
    let xs = [1usize, 32, 12, 13];
    let xt = r.tensor(DType::F32, &xs, -2.0, 2.0);
    let x = g.add_input("x", xt.ty());
    let rt = r.tensor(DType::F32, &[1, 32, 12, 13], -1.0, 1.0);
    let res = g.add_input("r", rt.ty());
    let x6t = r.tensor(DType::F32, &[1, 6, 12, 13], -2.0, 2.0);
    let x6 = g.add_input("x6", x6t.ty());
    let mut conv = |g: &mut Graph, x, cout: usize, cin_g: usize, k: usize, groups, stride| {
        const_conv(g, &mut r, x, [cout, cin_g, k], groups, stride, 0.5)
    };
    let swish = |g: &mut Graph, c, flip: bool| {
        let s = node(g, Op::Unary(UnaryOp::Sigmoid), &[c]);
        let ins = if flip { [s, c] } else { [c, s] };
        node(g, Op::Binary(BinaryOp::Mul), &ins)
    };
    let c1 = conv(&mut g, x, 24, 32, 1, 1, 1);
    let y1 = swish(&mut g, c1, false);
    let c2 = conv(&mut g, x6, 8, 6, 3, 1, 1);
    let y2 = swish(&mut g, c2, true);
    let c3 = conv(&mut g, x, 32, 1, 3, 0, 1);
    let y3 = swish(&mut g, c3, false);
    let c4 = conv(&mut g, x, 32, 1, 5, 0, 2);
    let y4 = swish(&mut g, c4, true);
    let c5 = conv(&mut g, x, 32, 32, 3, 1, 1);
    let s5 = node(&mut g, Op::Binary(BinaryOp::Add), &[c5, res]);
    let y5 = swish(&mut g, s5, false);
    let c6 = conv(&mut g, x, 16, 32, 1, 1, 1);
    let y6 = node(&mut g, Op::Unary(UnaryOp::Sigmoid), &[c6]);
    let c7 = conv(&mut g, x, 16, 32, 1, 1, 1);
    let y7 = swish(&mut g, c7, false);
    let y7b = node(&mut g, Op::Unary(UnaryOp::Relu), &[c7]);
    // NNEF's own `silu` after a depthwise conv.
    let c8 = conv(&mut g, x, 32, 1, 3, 0, 1);
    let y8 = node(&mut g, Op::Unary(UnaryOp::Silu), &[c8]);
    // Hard swish as PyTorch spells it, `div(mul(c, clamp(c + 3, 0, 6)), 6)`, after a
    // 1×1 conv, and as Keras does, `mul(mul(clamp(3 + c, 0, 6), 1/6), c)`, after a
    // 5×5 depthwise conv at stride 2.
    let scalar = |g: &mut Graph, v: f32| g.add_const(Tensor::f32(vec![], vec![v]), None, None);
    let (k3, k0, k6, k16) = (
        scalar(&mut g, 3.0),
        scalar(&mut g, 0.0),
        scalar(&mut g, 6.0),
        scalar(&mut g, 1.0 / 6.0),
    );
    let c9 = conv(&mut g, x, 24, 32, 1, 1, 1);
    let a9 = node(&mut g, Op::Binary(BinaryOp::Add), &[c9, k3]);
    let l9 = node(&mut g, Op::Clamp, &[a9, k0, k6]);
    let m9 = node(&mut g, Op::Binary(BinaryOp::Mul), &[c9, l9]);
    let y9 = node(&mut g, Op::Binary(BinaryOp::Div), &[m9, k6]);
    let c10 = conv(&mut g, x, 32, 1, 5, 0, 2);
    let a10 = node(&mut g, Op::Binary(BinaryOp::Add), &[k3, c10]);
    let l10 = node(&mut g, Op::Clamp, &[a10, k0, k6]);
    let d10 = node(&mut g, Op::Binary(BinaryOp::Mul), &[l10, k16]);
    let y10 = node(&mut g, Op::Binary(BinaryOp::Mul), &[d10, c10]);
    g.outputs
        .extend([y1, y2, y3, y4, y5, y6, y7, y7b, y8, y9, y10]);
    let inputs = [xt, rt, x6t];
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");
    let native = opts("swn");
    let mut loops = opts("swl");
    loops.target = Some(target_lexicon::Triple::host().to_string());
    let tiled = super::gemm::self_contained("sws");
    for o in [native, loops, tiled] {
        let m = load(&g, &o);
        let k = &m.art.kernels;
        // Only the third reader's sigmoid and mul run alone.
        assert_eq!(k.matches("_sigmoid\n").count(), 1, "{k}");
        assert_eq!(k.matches("_mul\n").count(), 1, "{k}");
        for op in ["_add\n", "_silu\n", "_clamp\n", "_div\n"] {
            assert!(!k.contains(op), "{op}: {k}");
        }
        assert!(k.contains("Swish") && k.contains("Sigmoid"), "{k}");
        // (Loop nests show their activation as expressions, not by name.)
        assert!(k.contains("HardSwish"), "{k}");
        let got = m.run(&inputs).expect("status 0");
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_close(
                &format!("{:?} {:?} output {i}", o.target, o.self_contained),
                a,
                b,
            );
        }
    }
}

/// Timing of a resnet18 basic block at 56×56×64 (two 3×3 convs, residual, relu):
/// `cargo test -p nnefc-compiler --lib bench_resnet_block -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_resnet_block() {
    use crate::ir::{BinaryOp, UnaryOp};
    let mut r = Rng::new(1);
    let mut g = Graph::new("rb");
    let xt = r.tensor(DType::F32, &[1, 64, 56, 56], -1.0, 1.0);
    let x = g.add_input("x", xt.ty());
    let conv = |g: &mut Graph, r: &mut Rng, x| {
        let f = g.add_const(r.tensor(DType::F32, &[64, 64, 3, 3], -0.1, 0.1), None, None);
        let b = g.add_const(r.tensor(DType::F32, &[1, 64], -0.1, 0.1), None, None);
        let a = ConvAttrs {
            border: Border::Constant,
            padding: vec![(1, 1), (1, 1)],
            stride: Vec::new(),
            dilation: Vec::new(),
            groups: 1,
            output_shape: Vec::new(),
        };
        node(g, Op::Conv(a), &[x, f, b])
    };
    let c1 = conv(&mut g, &mut r, x);
    let y1 = node(&mut g, Op::Unary(UnaryOp::Relu), &[c1]);
    let c2 = conv(&mut g, &mut r, y1);
    let s = node(&mut g, Op::Binary(BinaryOp::Add), &[c2, x]);
    let y = node(&mut g, Op::Unary(UnaryOp::Relu), &[s]);
    let mp = WindowAttrs {
        size: vec![1, 1, 3, 3],
        border: Border::Ignore,
        padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
        stride: vec![1, 1, 2, 2],
        dilation: Vec::new(),
        output_shape: Vec::new(),
    };
    let p = node(&mut g, Op::MaxPool(mp), &[y]);
    g.outputs.extend([y, p]);
    let t0 = std::time::Instant::now();
    let m = load(&g, &opts("rb"));
    let compile = t0.elapsed();
    let inputs = [xt];
    m.run(&inputs).expect("status 0");
    let reps = 10;
    let t1 = std::time::Instant::now();
    for _ in 0..reps {
        m.run(&inputs).expect("status 0");
    }
    let run = t1.elapsed() / reps;
    let flops = 2.0 * 2.0 * 64.0 * 64.0 * 9.0 * 56.0 * 56.0;
    println!(
        "resnet block 56x56x64: compile+link {compile:?}, run {run:?}, {:.1} GFLOP/s",
        flops / run.as_secs_f64() / 1e9
    );
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");
    let got = m.run(&inputs).expect("status 0");
    assert_close("block", &got[0], &want[0]);
    assert_close("pool", &got[1], &want[1]);
}

/// A mixed graph batch: convs (all paths), pools, matmul, linear.
fn cross_batch(seed: u64) -> Batch {
    let mut r = Rng::new(seed);
    let mut b = Batch::new();
    let mut tries = 0;
    while b.len() < 10 && tries < 500 {
        tries += 1;
        let mut a = conv_attrs(&mut r, 2, true);
        a.groups = [1, 2, 0][r.below(3)];
        let c = 2 * (1 + r.below(2));
        let cout = if a.groups == 0 {
            c
        } else {
            2 * (1 + r.below(4))
        };
        let cg = if a.groups == 0 { 1 } else { c / a.groups };
        let xs = vec![1 + r.below(2), c, 3 + r.below(7), 3 + r.below(7)];
        let fs = vec![cout, cg, 1 + r.below(3), 1 + r.below(3)];
        let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
        let f = r.tensor(DType::F32, &fs, -1.0, 1.0);
        let bias = r.tensor(DType::F32, &[1, cout], -1.0, 1.0);
        b.add(
            format!("conv {xs:?} {fs:?} {a:?}"),
            Op::Conv(a),
            vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
        );
    }
    let x = r.tensor(DType::F32, &[1, 3, 9, 8], -1.0, 1.0);
    let w = WindowAttrs {
        size: vec![1, 1, 3, 3],
        border: Border::Ignore,
        padding: Vec::new(),
        stride: vec![1, 1, 2, 2],
        dilation: Vec::new(),
        output_shape: Vec::new(),
    };
    b.add(
        "max_pool".into(),
        Op::MaxPool(w.clone()),
        vec![Arg::In(x.clone())],
    );
    b.add(
        "avg_pool".into(),
        Op::Box {
            window: w,
            normalize: true,
        },
        vec![Arg::In(x)],
    );
    let ma = r.tensor(DType::F32, &[13, 7], -1.0, 1.0);
    let mb = r.tensor(DType::F32, &[7, 5], -1.0, 1.0);
    b.add(
        "matmul const A".into(),
        Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        vec![Arg::Const(ma.clone()), Arg::In(mb.clone())],
    );
    b.add(
        "matmul".into(),
        Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        vec![Arg::In(ma), Arg::In(mb)],
    );
    let lx = r.tensor(DType::F32, &[3, 6], -1.0, 1.0);
    let lw = r.tensor(DType::F32, &[4, 6], -1.0, 1.0);
    let lb = r.tensor(DType::F32, &[1, 4], -1.0, 1.0);
    b.add(
        "linear".into(),
        Op::Linear,
        vec![Arg::In(lx), Arg::Const(lw), Arg::Const(lb)],
    );
    let ex = r.tensor(DType::F32, &[2, 5], -3.0, 3.0);
    b.add(
        "relu".into(),
        Op::Unary(crate::ir::UnaryOp::Relu),
        vec![Arg::In(ex)],
    );
    b
}

/// The x86-64 self-contained object (no runtime GEMM) runs natively and matches.
#[test]
fn self_contained_matches_interp() {
    let b = cross_batch(31);
    let o = crate::back::BackendOptions {
        self_contained: Some(true),
        ..opts("selfc")
    };
    let art = crate::back::compile(&b.g, &o).expect("compile");
    assert!(
        !art.kernels.lines().any(|l| l.starts_with("gemm ")),
        "GEMM steps left: {}",
        art.kernels
    );
    assert!(
        !art.object.windows(11).any(|w| w == b"nnefc_sgemm"),
        "object references the runtime"
    );
    b.check_with(&o);
}

/// Whether `aarch64-linux-gnu-gcc` and `qemu-aarch64` are installed.
pub(super) fn aarch64_tools() -> bool {
    tool("aarch64-linux-gnu-gcc") && tool("qemu-aarch64")
}

fn tool(name: &str) -> bool {
    std::process::Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// aarch64-linux: compile, link a static C driver with the inputs embedded, run it under
/// qemu, compare the printed output bits with the interpreter.
#[test]
fn aarch64_under_qemu() {
    if !aarch64_tools() {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            (format!("skipped: aarch64 cross tools not installed (run .ci/setup)") + "\n")
                .as_bytes(),
        );
        return;
    }
    check_on_aarch64(cross_batch(41), "xa");
}

/// Compiles `b` for aarch64-linux (self-contained), links a static C driver with the
/// inputs embedded, runs it under qemu and compares the printed output bits with the
/// interpreter. The caller checks that the tools exist ([`aarch64_tools`]).
pub(super) fn check_on_aarch64(b: Batch, prefix: &str) {
    let want = crate::ir::interp::run(&b.g, &b.inputs).expect("interp");
    let got = run_on_aarch64(&b.g, &b.inputs, prefix);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_close(&format!("aarch64 {}", b.what[i]), g, w);
    }
}

/// Compiles `g` for aarch64-linux (self-contained), links a static C driver with the
/// inputs embedded, runs it under qemu and returns the outputs (read back bit for bit,
/// any dtype). The caller checks that the tools exist ([`aarch64_tools`]).
pub(super) fn run_on_aarch64(g: &Graph, inputs: &[Tensor], prefix: &str) -> Vec<Tensor> {
    let o = crate::back::BackendOptions {
        target: Some("aarch64-unknown-linux-gnu".into()),
        ..opts(prefix)
    };
    assert!(o.is_self_contained());
    let art = crate::back::compile(g, &o).expect("compile");
    let mut c = String::from(
        "#include <stdio.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n",
    );
    c += &format!("int {prefix}_run(const void *const *, void *const *, void *);\n");
    for (i, t) in inputs.iter().enumerate() {
        let bytes: Vec<String> = t.to_le_bytes().iter().map(|b| format!("{b}")).collect();
        c += &format!(
            "static const uint8_t in{i}[] __attribute__((aligned(64))) = {{{}}};\n",
            if bytes.is_empty() {
                "0".into()
            } else {
                bytes.join(",")
            }
        );
    }
    for (i, t) in art.interface.outputs.iter().enumerate() {
        c += &format!(
            "static uint8_t out{i}[{}] __attribute__((aligned(64)));\n",
            (t.volume() * t.dtype.size()).max(1)
        );
    }
    c += "int main(void) {\n";
    c += &format!(
        "  const void *ins[] = {{{}}};\n",
        (0..inputs.len())
            .map(|i| format!("in{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    c += &format!(
        "  void *outs[] = {{{}}};\n",
        (0..art.interface.outputs.len())
            .map(|i| format!("out{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    c += &format!(
        "  void *ws = aligned_alloc(64, {});\n",
        art.workspace_size.max(64).div_ceil(64) * 64
    );
    c += &format!("  int st = {prefix}_run(ins, outs, ws);\n");
    c += "  if (st) { printf(\"status %d\\n\", st); return 1; }\n";
    for (i, t) in art.interface.outputs.iter().enumerate() {
        c += &format!(
            "  for (int j = 0; j < {}; j++) printf(\"%02x\", out{i}[j]);\n  printf(\"\\n\");\n",
            t.volume() * t.dtype.size()
        );
    }
    c += "  return 0;\n}\n";
    let dir = std::env::temp_dir().join(format!("nnefc-{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("model.o"), &art.object).expect("write");
    std::fs::write(dir.join("main.c"), c).expect("write");
    let st = std::process::Command::new("aarch64-linux-gnu-gcc")
        .args(["-static", "-O1", "main.c", "model.o", "-o", "prog"])
        .current_dir(&dir)
        .status()
        .expect("gcc");
    assert!(st.success(), "cross link failed");
    let out = std::process::Command::new("qemu-aarch64")
        .arg(dir.join("prog"))
        .output()
        .expect("qemu");
    assert!(
        out.status.success(),
        "program failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), art.interface.outputs.len());
    let got = lines
        .iter()
        .zip(&art.interface.outputs)
        .map(|(line, t)| {
            let bytes: Vec<u8> = (0..line.len() / 2)
                .map(|j| u8::from_str_radix(&line[2 * j..2 * j + 2], 16).expect("hex"))
                .collect();
            Tensor::from_le_bytes(t.dtype, t.shape.clone(), &bytes).expect("output size")
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    got
}

/// Objects for the other targets build (ELF/Mach-O magic) and are self-contained.
#[test]
fn cross_targets_build() {
    let b = cross_batch(51);
    for (t, magic) in [
        ("aarch64-unknown-linux-gnu", &b"\x7fELF"[..]),
        ("x86_64-unknown-linux-gnu", &b"\x7fELF"[..]),
        ("aarch64-apple-darwin", &[0xcf, 0xfa, 0xed, 0xfe][..]),
        ("x86_64-apple-darwin", &[0xcf, 0xfa, 0xed, 0xfe][..]),
    ] {
        let o = crate::back::BackendOptions {
            target: Some(t.into()),
            ..opts("xt")
        };
        let art = crate::back::compile(&b.g, &o).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert!(art.object.starts_with(magic), "{t}: wrong object format");
        if t.contains("apple") {
            assert!(
                !art.object.windows(11).any(|w| w == b"nnefc_sgemm"),
                "{t}: references the runtime"
            );
        }
    }
}

/// `max_pool` with the `ignore` border over padding takes the region split (no padded
/// copy): resnet's 3×3 stride 2 pad 1, asymmetric padding, dilation, padding along
/// several dims, a 1-wide input, and windows lying wholly in the padding (which fall back
/// to the padded copy); every case against the interpreter.
#[test]
fn max_pool_ignore_regions() {
    // The split is taken: no padded copy for resnet's pool (in a self-contained object,
    // which makes no runtime call; otherwise the pool is `nnefc_maxpool`).
    let mut g = crate::ir::Graph::new("m");
    let x = g.add_input("x", crate::ir::TensorType::new(DType::F32, &[1, 4, 12, 12]));
    let w = WindowAttrs {
        size: vec![1, 1, 3, 3],
        border: Border::Ignore,
        padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
        stride: vec![1, 1, 2, 2],
        dilation: Vec::new(),
        output_shape: Vec::new(),
    };
    let y = g.add_node(
        Op::MaxPool(w),
        vec![x],
        vec![crate::ir::TensorType::new(DType::F32, &[1, 4, 6, 6])],
    )[0];
    g.outputs.push(y);
    let plan = crate::passes::memory_plan::plan(&g).expect("plan");
    let contained = crate::back::BackendOptions {
        self_contained: Some(true),
        ..opts("m")
    };
    let text = crate::back::kernels(&g, &plan, &contained)
        .expect("kernels")
        .to_string();
    assert!(!text.contains("pad_copy"), "{text}");
    assert_eq!(text.matches("kernel ").count(), 4, "{text}");

    let mut r = Rng::new(23);
    let mut b = Batch::new();
    let cases: [(&[usize], &[usize], &[usize], &[usize], &[(usize, usize)]); 7] = [
        (
            &[1, 4, 12, 12],
            &[1, 1, 3, 3],
            &[1, 1, 2, 2],
            &[1, 1, 1, 1],
            &[(0, 0), (0, 0), (1, 1), (1, 1)],
        ),
        (
            &[2, 3, 9, 10],
            &[1, 1, 3, 3],
            &[1, 1, 1, 1],
            &[1, 1, 1, 1],
            &[(0, 0), (0, 0), (2, 0), (0, 2)],
        ),
        (
            &[1, 2, 11, 7],
            &[1, 1, 3, 2],
            &[1, 1, 2, 1],
            &[1, 1, 2, 1],
            &[(0, 0), (0, 0), (1, 2), (1, 1)],
        ),
        (
            &[1, 3, 5, 5],
            &[1, 2, 2, 2],
            &[1, 1, 1, 1],
            &[1, 1, 1, 1],
            &[(0, 0), (1, 0), (1, 0), (0, 1)],
        ),
        (
            &[1, 1, 1, 9],
            &[1, 1, 3, 3],
            &[1, 1, 1, 2],
            &[1, 1, 1, 1],
            &[(0, 0), (0, 0), (1, 1), (1, 1)],
        ),
        (
            &[1, 2, 4, 4],
            &[1, 1, 2, 2],
            &[1, 1, 1, 1],
            &[1, 1, 1, 1],
            &[(0, 0), (0, 0), (3, 0), (0, 0)],
        ),
        (
            &[1, 2, 13, 13],
            &[1, 1, 5, 5],
            &[1, 1, 3, 3],
            &[1, 1, 1, 1],
            &[(0, 0), (0, 0), (2, 2), (2, 2)],
        ),
    ];
    for (shape, size, stride, dilation, padding) in cases {
        let w = WindowAttrs {
            size: size.to_vec(),
            border: Border::Ignore,
            padding: padding.to_vec(),
            stride: stride.to_vec(),
            dilation: dilation.to_vec(),
            output_shape: Vec::new(),
        };
        let x = r.tensor(DType::F32, shape, -2.0, 2.0);
        b.add(
            format!("max_pool {shape:?} {w:?}"),
            Op::MaxPool(w),
            vec![Arg::In(x)],
        );
    }
    // Both lowerings: the region split (self-contained) and `nnefc_maxpool`.
    b.clone().check_with(&contained);
    b.check("mpr");
}

/// The regions of a depthwise conv (and of a padded max pool) large enough to split run as
/// one fork-join (`object::parallel_groups`): small planes with many channels, stride 1
/// and 2, against the interpreter serially and through the reverse-order 3-worker pool;
/// the object (for a target without AVX-512, where these are loop nests) holds a group
/// task function.
#[test]
fn grouped_regions_match_the_interpreter() {
    let mut r = Rng::new(41);
    let mut b = Batch::new();
    for (c, h, stride) in [(960, 7, 1), (192, 14, 2), (64, 24, 1), (3, 130, 1)] {
        let a = crate::ir::ConvAttrs {
            border: Border::Constant,
            padding: vec![(1, 1), (1, 1)],
            stride: vec![stride, stride],
            dilation: vec![],
            groups: 0,
            output_shape: vec![],
        };
        let x = r.tensor(DType::F32, &[1, c, h, h], -1.0, 1.0);
        let f = r.tensor(DType::F32, &[c, 1, 3, 3], -1.0, 1.0);
        let bias = r.tensor(DType::F32, &[1, c], -1.0, 1.0);
        b.add(
            format!("dwconv c{c} h{h} s{stride}"),
            Op::Conv(a),
            vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
        );
    }
    let w = WindowAttrs {
        size: vec![1, 1, 3, 3],
        border: Border::Ignore,
        padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
        stride: vec![1, 1, 2, 2],
        dilation: Vec::new(),
        output_shape: Vec::new(),
    };
    let x = r.tensor(DType::F32, &[1, 64, 40, 40], -1.0, 1.0);
    b.add("max_pool regions".into(), Op::MaxPool(w), vec![Arg::In(x)]);
    // The loop nests: on AVX-512 targets both ops would be runtime calls.
    let mut o = opts("grp");
    o.target = Some(target_lexicon::Triple::host().to_string());
    let art = crate::back::compile(&b.g, &o).expect("compiles");
    let has = |s: &str| art.object.windows(s.len()).any(|w| w == s.as_bytes());
    assert!(has("grp_group0"), "no grouped regions");
    b.check_with(&o);
}

/// Which kernels may share a task without a barrier: slab-by-slab producers and
/// consumers may, a transposed read, an indirect read, or a read of another buffer that
/// shares the written bytes may not.
#[test]
fn cross_task_dependencies_break_groups() {
    use crate::back::kernel::{BufKind, Kernel, Program};
    use crate::back::object::no_cross_task_dependency;
    let mut p = Program::default();
    let x = p.add_buffer(BufKind::Workspace(0), DType::F32, 256);
    let alias = p.add_buffer(BufKind::Workspace(512), DType::F32, 64);
    let y = p.add_buffer(BufKind::Workspace(4096), DType::F32, 256);
    let src = p.add_buffer(BufKind::Input(0), DType::F32, 256);
    // a: x[16i + j] = src[16i + j]
    let mut a = Kernel::new("a", &[16, 16]);
    let l = a.access(src, 0, vec![16, 1]);
    a.load(l, DType::F32);
    a.set_store(x, 0, vec![16, 1]);
    let reader = |name: &str, buf, strides: Vec<i64>| {
        let mut k = Kernel::new(name, &[16, 16]);
        let l = k.access(buf, 0, strides);
        k.load(l, DType::F32);
        k.set_store(y, 0, vec![16, 1]);
        k
    };
    assert!(no_cross_task_dependency(
        &p,
        &a,
        &reader("same slab", x, vec![16, 1])
    ));
    assert!(!no_cross_task_dependency(
        &p,
        &a,
        &reader("transposed", x, vec![1, 16])
    ));
    assert!(no_cross_task_dependency(
        &p,
        &a,
        &reader("other buffer", src, vec![1, 16])
    ));
    assert!(!no_cross_task_dependency(
        &p,
        &a,
        &reader("aliasing bytes", alias, vec![4, 1])
    ));
    // A later kernel overwriting what an earlier one reads transposed.
    let mut w = Kernel::new("w", &[16, 16]);
    let l = w.access(y, 0, vec![16, 1]);
    w.load(l, DType::F32);
    w.set_store(src, 0, vec![16, 1]);
    assert!(!no_cross_task_dependency(
        &p,
        &reader("reads src", src, vec![1, 16]),
        &w
    ));
}

/// Checks the cases `build` makes against the interpreter twice: compiled for this machine
/// (whose dump contains `marker`, a runtime call, exactly when it has AVX-512) and for a
/// target without AVX-512 (the host triple's baseline: loop nests or GEMMs).
fn check_both_paths(build: &dyn Fn() -> Batch, prefix: &str, marker: &str) {
    let native = opts(prefix);
    let uses_runtime = crate::back::object::target_has_avx512(&native).unwrap();
    let g = build().g;
    let plan = crate::passes::memory_plan::plan(&g).unwrap();
    let dump = crate::back::kernels(&g, &plan, &native)
        .unwrap()
        .to_string();
    assert_eq!(dump.contains(marker), uses_runtime, "{dump}");
    build().check_with(&native);
    let mut loops = opts(&format!("{prefix}l"));
    loops.target = Some(target_lexicon::Triple::host().to_string());
    assert!(!crate::back::object::target_has_avx512(&loops).unwrap());
    build().check_with(&loops);
}

/// 2-D depthwise convs through both of their code paths, each against the interpreter:
/// the runtime's vector kernel (`Step::Window`, chosen when the target has AVX-512)
/// and the f32x4 loop nests (chosen for a target without it, here the host triple with
/// its baseline features). Odd channel counts, widths that do not fill a 16-lane block,
/// strides 1–3, dilation, asymmetric and automatic padding, 1×1 to 5×5 filters and one
/// wider than the kernel's 16-column limit.
#[test]
fn depthwise_both_paths_random() {
    let build = || {
        let mut r = Rng::new(29);
        let mut b = Batch::new();
        let mut tries = 0;
        while b.len() < 40 && tries < 4000 {
            tries += 1;
            let mut a = conv_attrs(&mut r, 2, false);
            a.groups = 0;
            a.stride[1] = 1 + r.below(3);
            let (n, c) = (1 + r.below(2), 1 + r.below(7));
            let kw = if tries % 17 == 0 { 18 } else { 1 + r.below(5) };
            let xs = vec![n, c, 1 + r.below(20), kw + r.below(40)];
            let fs = vec![c, 1, 1 + r.below(5), kw];
            let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
            let f = r.tensor(DType::F32, &fs, -1.0, 1.0);
            let bias = r.tensor(DType::F32, &[1, c], -1.0, 1.0);
            b.add(
                format!("dwconv x{xs:?} f{fs:?} {a:?}"),
                Op::Conv(a),
                vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
            );
        }
        assert!(b.len() >= 30, "only {} valid cases", b.len());
        b
    };
    check_both_paths(&build, "dwn", "\ndwconv ");
}

/// 2-D `max_pool` with the `ignore` border through both of its code paths, each against
/// the interpreter: the runtime's vector kernel (`maxpool` in the kernel dump, chosen for
/// 3×3 windows with strides 1 or 2 when the target has AVX-512) and the loop nests (a
/// target without it). Odd channel counts, rows that do not fill a 16-lane block,
/// asymmetric padding.
#[test]
fn max_pool_both_paths_random() {
    let build = || {
        let mut r = Rng::new(41);
        let mut b = Batch::new();
        while b.len() < 24 {
            let s = 1 + r.below(2);
            let pad = |r: &mut Rng| (r.below(3), r.below(3));
            let w = WindowAttrs {
                size: vec![1, 1, 3, 3],
                border: Border::Ignore,
                padding: vec![(0, 0), (0, 0), pad(&mut r), pad(&mut r)],
                stride: vec![1, 1, s, s],
                dilation: Vec::new(),
                output_shape: Vec::new(),
            };
            let xs = vec![
                1 + r.below(2),
                1 + r.below(7),
                1 + r.below(20),
                16 * s + r.below(60),
            ];
            let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
            b.add(
                format!("max_pool x{xs:?} {w:?}"),
                Op::MaxPool(w),
                vec![Arg::In(x)],
            );
        }
        b
    };
    check_both_paths(&build, "mpn", "\nmaxpool ");
}

/// A first-layer conv, its activation and a 3×3 `max_pool` (`ignore` border) after it:
/// on AVX-512 hosts one fused call (`conv_pool` in the kernel dump, `nnefc_conv_pool`),
/// elsewhere (a target without AVX-512) the conv and the pool apart, both against the
/// interpreter. 3×3, 5×5 and 7×7 filters, strides 1 and 2 for conv and pool, conv and
/// pool padding, 1–4 input channels, output channel counts that do not fill a block of
/// 64 (and two blocks), two samples, no activation, relu or clamp. A pool whose input is
/// also a graph output stays apart.
#[test]
fn conv_pool_both_paths_random() {
    let mut r = Rng::new(61);
    for case in 0..10 {
        let k = [3, 5, 7][case % 3];
        let (cs, ps) = (1 + r.below(2), 1 + r.below(2));
        let cin = 1 + r.below(4);
        let cout = [1 + r.below(30), 64, 70 + r.below(60)][case % 3];
        let xs = [1 + case % 2, cin, k + 4 + r.below(30), k + 4 + r.below(50)];
        let mut g = Graph::new("cp");
        let xt = r.tensor(DType::F32, &xs, -1.0, 1.0);
        let x = g.add_input("x", xt.ty());
        let f = g.add_const(
            r.tensor(DType::F32, &[cout, cin, k, k], -1.0, 1.0),
            None,
            None,
        );
        let bias = g.add_const(r.tensor(DType::F32, &[1, cout], -1.0, 1.0), None, None);
        let a = ConvAttrs {
            stride: vec![cs, cs],
            padding: vec![
                (r.below(k / 2 + 1), r.below(2)),
                (r.below(k / 2 + 1), r.below(2)),
            ],
            ..Default::default()
        };
        let c = node(&mut g, Op::Conv(a), &[x, f, bias]);
        let act = match case % 4 {
            0 => c,
            1 | 2 => node(&mut g, Op::Unary(crate::ir::UnaryOp::Relu), &[c]),
            _ => {
                let lo = g.add_const(Tensor::f32(vec![], vec![-0.25]), None, None);
                let hi = g.add_const(Tensor::f32(vec![], vec![0.5]), None, None);
                node(&mut g, Op::Clamp, &[c, lo, hi])
            }
        };
        let w = WindowAttrs {
            size: vec![1, 1, 3, 3],
            border: Border::Ignore,
            padding: vec![
                (0, 0),
                (0, 0),
                (r.below(2), r.below(2)),
                (r.below(2), r.below(2)),
            ],
            stride: vec![1, 1, ps, ps],
            dilation: Vec::new(),
            output_shape: Vec::new(),
        };
        let y = node(&mut g, Op::MaxPool(w), &[act]);
        g.outputs.push(y);
        // The last case also outputs the conv's activation: the pool cannot take it.
        let apart = case == 9;
        if apart {
            g.outputs.push(act);
        }
        let inputs = [xt];
        let want = crate::ir::interp::run(&g, &inputs).expect("interp");
        let name = format!("cp{case}");
        let native = opts(&name);
        let m = load(&g, &native);
        let fused = m.art.kernels.contains("\nconv_pool b");
        let avx512 = crate::back::object::target_has_avx512(&native).expect("host");
        assert_eq!(fused, avx512 && !apart, "{}", m.art.kernels);
        let got = m.run(&inputs).expect("status 0");
        for (gt, wt) in got.iter().zip(&want) {
            assert_close(&name, gt, wt);
        }
        let mut loops = opts(&format!("{name}l"));
        loops.target = Some(target_lexicon::Triple::host().to_string());
        let m = load(&g, &loops);
        assert!(!m.art.kernels.contains("conv_pool"), "{}", m.art.kernels);
        let got = m.run(&inputs).expect("status 0");
        for (gt, wt) in got.iter().zip(&want) {
            assert_close(&format!("{name} (loops)"), gt, wt);
        }
    }
}

/// Dense 2-D convs of few input channels through both of their code paths, each against
/// the interpreter: the runtime's direct kernel (`conv … from C channels` in the kernel
/// dump, chosen for 3×3/5×5/7×7 filters with equal strides when the target has AVX-512)
/// and im2col + GEMM (a target without it). 1–4 channels with stride 2 and up to 16 with
/// stride 1, and on maps of 28 or more output columns up to 32 channels (64 per group of
/// a grouped conv: `select::conv::direct_pays`), output channel counts that do not fill
/// a tile of 8, rows that do not fill a 16-lane block, asymmetric and automatic padding,
/// grouped convs of one image (their groups the call's samples); epilogues: the runtime
/// test.
#[test]
fn direct_conv_both_paths_random() {
    let build = || {
        let mut r = Rng::new(53);
        let mut b = Batch::new();
        while b.len() < 30 {
            let mut a = conv_attrs(&mut r, 2, false);
            let k = [3, 5, 7][r.below(3)];
            let s = 1 + r.below(2);
            a.stride = vec![s, s];
            a.dilation = Vec::new();
            // Every third case grouped (one image): 2–3 groups of `cin` → `cout` channels.
            let groups = if b.len() % 3 == 2 { 2 + r.below(2) } else { 1 };
            // Every fourth case wide: 28–35 output columns and more channels.
            let wide = b.len() % 4 == 1;
            let cin = match (wide, groups > 1, s) {
                (true, true, _) => 17 + r.below(48),
                (true, false, _) => 17 + r.below(16),
                (false, _, 1) | (false, true, _) => 1 + r.below(16),
                (false, false, _) => 1 + r.below(4),
            };
            let (mut n, cout) = (1 + r.below(2), 1 + r.below(20));
            if groups > 1 {
                n = 1;
            }
            a.groups = groups;
            // Output columns: (w + pads − k) / s + 1 ≥ 28 needs w ≥ 27·s + k.
            let w = if wide {
                27 * s + k + r.below(8 * s)
            } else {
                k + r.below(40)
            };
            let xs = vec![n, groups * cin, k + r.below(if wide { 8 } else { 20 }), w];
            let fs = vec![groups * cout, cin, k, k];
            let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
            let f = r.tensor(DType::F32, &fs, -1.0, 1.0);
            let bias = r.tensor(DType::F32, &[1, groups * cout], -1.0, 1.0);
            b.add(
                format!("conv x{xs:?} f{fs:?} {a:?}"),
                Op::Conv(a),
                vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
            );
        }
        b
    };
    check_both_paths(&build, "dcn", " channels * b");
    // The grouped cases take the same call.
    let native = opts("dcg");
    if crate::back::object::target_has_avx512(&native).unwrap() {
        let g = build().g;
        let plan = crate::passes::memory_plan::plan(&g).unwrap();
        let dump = crate::back::kernels(&g, &plan, &native)
            .unwrap()
            .to_string();
        assert!(dump.contains(" per group "), "{dump}");
        // And the wide cases of more than 16 channels, dense and grouped.
        let from = |l: &str| {
            l.split(" from ")
                .nth(1)
                .and_then(|t| t.split(' ').next())
                .and_then(|c| c.parse::<usize>().ok())
        };
        for grouped in [false, true] {
            assert!(
                dump.lines().any(|l| l.starts_with("conv ")
                    && l.contains(" per group ") == grouped
                    && from(l).is_some_and(|c| c > 16)),
                "{dump}"
            );
        }
    }
}
