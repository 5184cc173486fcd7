//! NaN, ±∞, −0, denormals and large finite values through every op family, data-driven:
//! one graph holds a case per op (inputs built from a table of special values), the
//! interpreter's answers are checked against the pinned semantics (IEEE-propagating, see
//! `back`'s module docs and the README's choices), and compiled code must give the same
//! bits on every path: x86-64 with the runtime GEMM, x86-64 self-contained (Cranelift
//! GEMM tiles), x86-64 scalar only, and aarch64 under qemu.
//!
//! Comparison ([`Cmp`]): any NaN matches any NaN; infinities exactly; `Exact` compares
//! bits (so the sign of a zero counts); `AnyZero` is `Exact` except that +0 and −0 match
//! (min/max of a +0/−0 tie may give either zero on x86); `Approx` is for the polynomial
//! math (relative error, zero sign ignored, a finite result above 2^127.5 may overflow to
//! ∞ early, see `emit::math::Cx::exp`). Inputs an op's documented limits exclude (sin of
//! |x| > 8192, log of denormals, pow of −∞ to a fraction) are replaced by ordinary
//! values, each with its reason below.

use super::harness::{load, opts};
use super::window::{aarch64_tools, run_on_aarch64};
use crate::back::BackendOptions;
use crate::ir::infer::infer;
use crate::ir::{
    BinaryOp, Border, ConvAttrs, DType, Graph, Op, ReduceOp, Tensor, TensorData, TensorType,
    UnaryOp, ValueId, WindowAttrs,
};

const NAN: f32 = f32::NAN;
const INF: f32 = f32::INFINITY;
const DENORMAL: f32 = 1e-40;
const LARGE: f32 = 3e38;

/// The special values every element-wise op sees, padded with ordinary values to 14
/// elements (three f32x4 vectors and a scalar tail of two).
const UNARY_IN: [f32; 14] = [
    NAN, INF, -INF, -0.0, 0.0, DENORMAL, -DENORMAL, LARGE, -LARGE, 1.0, -2.5, 0.5, 20.0, -0.75,
];

/// Operands of the binary ops: every pair (121 elements).
const BINARY_IN: [f32; 11] = [
    NAN, INF, -INF, -0.0, 0.0, DENORMAL, LARGE, -LARGE, 1.0, -2.5, 0.5,
];

#[derive(Clone, Copy, Debug)]
enum Cmp {
    Exact,
    AnyZero,
    /// Tolerance relative to max(1, |want|) (sums cancel, so small results are held to
    /// an absolute bound; the math's accuracy is `math_accuracy`'s business).
    Approx(f32),
    /// `Approx`, except that an infinite result may be NaN (Winograd's transforms add and
    /// subtract an infinite input's terms: ∞ − ∞).
    InfMayBeNan(f32),
}

fn same(cmp: Cmp, got: f32, want: f32) -> bool {
    if let Cmp::InfMayBeNan(tol) = cmp {
        return (want.is_infinite() && got.is_nan()) || same(Cmp::Approx(tol), got, want);
    }
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    if got.to_bits() == want.to_bits() {
        return true;
    }
    match cmp {
        Cmp::Exact => false,
        Cmp::AnyZero => got == 0.0 && want == 0.0,
        Cmp::InfMayBeNan(_) => false,
        Cmp::Approx(tol) => {
            if want.is_infinite() {
                false
            } else if want.abs() > 2.4e38 && got.is_infinite() {
                got.signum() == want.signum()
            } else {
                (got - want).abs() <= tol * want.abs().max(1.0)
            }
        }
    }
}

/// One graph with many cases, each an output compared its own way.
struct Suite {
    g: Graph,
    inputs: Vec<Tensor>,
    what: Vec<(String, Cmp)>,
}

impl Suite {
    fn new() -> Suite {
        Suite {
            g: Graph::new("special"),
            inputs: Vec::new(),
            what: Vec::new(),
        }
    }
    fn input(&mut self, shape: &[usize], data: Vec<f32>) -> ValueId {
        let t = Tensor::f32(shape.to_vec(), data);
        let v = self.g.add_input(format!("i{}", self.inputs.len()), t.ty());
        self.inputs.push(t);
        v
    }
    fn konst(&mut self, shape: &[usize], data: Vec<f32>) -> ValueId {
        self.g
            .add_const(Tensor::f32(shape.to_vec(), data), None, None)
    }
    fn node(&mut self, op: Op, ins: Vec<ValueId>) -> ValueId {
        let tys: Vec<TensorType> = ins
            .iter()
            .map(|v| self.g.values[v.index()].ty.clone())
            .collect();
        let refs: Vec<&TensorType> = tys.iter().collect();
        let out = infer(&op, &refs).unwrap_or_else(|e| panic!("{op:?}: {e:?}"));
        self.g.add_node(op, ins, out)[0]
    }
    fn output(&mut self, v: ValueId, what: String, cmp: Cmp) {
        self.g.outputs.push(v);
        self.what.push((what, cmp));
    }

    /// Compares `got` (one tensor per output) with `want`.
    fn compare(&self, path: &str, got: &[Tensor], want: &[Tensor]) {
        assert_eq!(got.len(), want.len(), "{path}: output count");
        for ((g, w), (what, cmp)) in got.iter().zip(want).zip(&self.what) {
            assert_eq!(g.shape, w.shape, "{path} {what}: shape");
            match (&g.data, &w.data) {
                (TensorData::F32(gs), TensorData::F32(ws)) => {
                    for (i, (&a, &b)) in gs.iter().zip(ws).enumerate() {
                        assert!(
                            same(*cmp, a, b),
                            "{path} {what}: element {i}: got {a:e} ({:#010x}), want {b:e} \
                             ({:#010x})",
                            a.to_bits(),
                            b.to_bits()
                        );
                    }
                }
                _ => assert_eq!(g, w, "{path} {what}"),
            }
        }
    }

    /// The interpreter's answers, then every compiled path against them.
    fn check(&self, prefix: &str) {
        let want = crate::ir::interp::run(&self.g, &self.inputs).expect("interp");
        let paths: [(&str, BackendOptions); 3] = [
            ("x86-64 runtime GEMM", opts(prefix)),
            (
                "x86-64 self-contained",
                BackendOptions {
                    self_contained: Some(true),
                    ..opts(prefix)
                },
            ),
            (
                "x86-64 scalar",
                BackendOptions {
                    vectorize: false,
                    ..opts(prefix)
                },
            ),
        ];
        for (path, o) in paths {
            let got = load(&self.g, &o).run(&self.inputs).expect("status 0");
            self.compare(path, &got, &want);
        }
        if aarch64_tools() {
            let got = run_on_aarch64(&self.g, &self.inputs, prefix);
            self.compare("aarch64 (qemu)", &got, &want);
        } else {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"skipped aarch64: cross tools not installed (run .ci/setup)\n",
            );
        }
    }
}

fn f32s(t: &Tensor) -> &[f32] {
    match &t.data {
        TensorData::F32(v) => v,
        _ => panic!("not f32"),
    }
}

/// The unary table's input for `op`, minus what the op's documented limits exclude.
fn unary_input(op: UnaryOp) -> Vec<f32> {
    UNARY_IN
        .iter()
        .map(|&x| match op {
            // Argument reduction is accurate for |x| ≲ 8192 only (`Cx::sincos`).
            UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tan if x.abs() == LARGE => 100.0,
            // Denormal inputs are read by their exponent field (`Cx::log`).
            UnaryOp::Log | UnaryOp::Log2 if x.abs() == DENORMAL => 1e-30,
            _ => x,
        })
        .collect()
}

fn unary_cmp(op: UnaryOp) -> Cmp {
    use UnaryOp as U;
    match op {
        U::Copy
        | U::Neg
        | U::Abs
        | U::Sign
        | U::Floor
        | U::Ceil
        | U::Round
        | U::Sqr
        | U::Sqrt
        | U::Rcp
        | U::Relu
        | U::LeakyRelu { .. } => Cmp::Exact,
        _ => Cmp::Approx(2e-6),
    }
}

const UNARY_OPS: [UnaryOp; 36] = [
    UnaryOp::Copy,
    UnaryOp::Neg,
    UnaryOp::Rcp,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tan,
    UnaryOp::Asin,
    UnaryOp::Acos,
    UnaryOp::Atan,
    UnaryOp::Sinh,
    UnaryOp::Cosh,
    UnaryOp::Tanh,
    UnaryOp::Asinh,
    UnaryOp::Acosh,
    UnaryOp::Atanh,
    UnaryOp::Abs,
    UnaryOp::Sign,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Sqr,
    UnaryOp::Sqrt,
    UnaryOp::Rsqr,
    UnaryOp::Rsqrt,
    UnaryOp::Log2,
    UnaryOp::Relu,
    UnaryOp::Sigmoid,
    UnaryOp::Softplus,
    UnaryOp::Silu,
    UnaryOp::Gelu,
    UnaryOp::Elu { alpha: 1.0 },
    UnaryOp::Selu {
        alpha: 1.673_263_2,
        lambda: 1.050_701,
    },
    UnaryOp::LeakyRelu { alpha: 0.1 },
    UnaryOp::Exp,
];

fn elementwise_suite() -> Suite {
    let mut s = Suite::new();
    for op in UNARY_OPS {
        let x = s.input(&[14], unary_input(op));
        let y = s.node(Op::Unary(op), vec![x]);
        s.output(y, format!("{op:?}"), unary_cmp(op));
    }
    let n = BINARY_IN.len();
    let xs: Vec<f32> = (0..n * n).map(|i| BINARY_IN[i / n]).collect();
    let ys: Vec<f32> = (0..n * n).map(|i| BINARY_IN[i % n]).collect();
    let x = s.input(&[n * n], xs.clone());
    let y = s.input(&[n * n], ys.clone());
    for (op, cmp) in [
        (BinaryOp::Add, Cmp::Exact),
        (BinaryOp::Sub, Cmp::Exact),
        (BinaryOp::Mul, Cmp::Exact),
        (BinaryOp::Div, Cmp::Exact),
        (BinaryOp::Min, Cmp::AnyZero),
        (BinaryOp::Max, Cmp::AnyZero),
        (BinaryOp::Lt, Cmp::Exact),
        (BinaryOp::Gt, Cmp::Exact),
        (BinaryOp::Le, Cmp::Exact),
        (BinaryOp::Ge, Cmp::Exact),
        (BinaryOp::Eq, Cmp::Exact),
        (BinaryOp::Ne, Cmp::Exact),
    ] {
        let z = s.node(Op::Binary(op), vec![x, y]);
        s.output(z, format!("{op:?}"), cmp);
    }
    // pow: IEEE `pow` except where `Cx::pow` documents otherwise (a −∞ base with a
    // fractional exponent; a denormal base, as log).
    let (px, py): (Vec<f32>, Vec<f32>) = xs
        .iter()
        .zip(&ys)
        .map(|(&a, &b)| {
            let fractional = b.is_finite() && b.fract() != 0.0;
            if (a == -INF && fractional) || a.abs() == DENORMAL {
                (2.0, 3.0)
            } else {
                (a, b)
            }
        })
        .unzip();
    let (px, py) = (s.input(&[n * n], px), s.input(&[n * n], py));
    let z = s.node(Op::Binary(BinaryOp::Pow), vec![px, py]);
    s.output(z, "pow".into(), Cmp::Approx(1e-4));
    // clamp with tensor bounds (NaN bounds included) and with literal bounds.
    let six = s.konst(&[], vec![6.0]);
    let z = s.node(Op::Clamp, vec![x, y, six]);
    s.output(z, "clamp(x, y, 6)".into(), Cmp::AnyZero);
    let u = s.input(&[14], UNARY_IN.to_vec());
    let zero = s.konst(&[], vec![0.0]);
    let z = s.node(Op::Clamp, vec![u, zero, six]);
    s.output(z, "clamp(x, 0, 6)".into(), Cmp::Exact);
    for to in [DType::I32, DType::Bool] {
        let z = s.node(Op::Cast { to }, vec![u]);
        s.output(z, format!("cast to {to:?}"), Cmp::Exact);
    }
    // A fused element-wise chain: clamp(min(relu(2x), y), 0, 6) in one kernel.
    let two = s.konst(&[], vec![2.0]);
    let (cx, cy) = (s.input(&[n * n], xs), s.input(&[n * n], ys));
    let t = s.node(Op::Binary(BinaryOp::Mul), vec![cx, two]);
    let t = s.node(Op::Unary(UnaryOp::Relu), vec![t]);
    let t = s.node(Op::Binary(BinaryOp::Min), vec![t, cy]);
    let t = s.node(Op::Clamp, vec![t, zero, six]);
    s.output(t, "fused chain".into(), Cmp::AnyZero);
    s
}

/// The pinned semantics, asserted on the interpreter (so constant folding has them too).
#[test]
fn interpreter_semantics() {
    let s = elementwise_suite();
    let out = crate::ir::interp::run(&s.g, &s.inputs).expect("interp");
    let by_name = |name: &str| {
        let i = s
            .what
            .iter()
            .position(|(w, _)| w == name)
            .unwrap_or_else(|| panic!("{name}"));
        f32s(&out[i]).to_vec()
    };
    // UNARY_IN: NaN, ∞, −∞, −0, 0, ...
    let sign = by_name("Sign");
    assert!(sign[0].is_nan(), "sign(NaN) = NaN");
    assert_eq!(&sign[1..5], &[1.0, -1.0, -0.0, 0.0]);
    assert_eq!(sign[3].to_bits(), (-0.0f32).to_bits(), "sign(−0) = −0");
    let relu = by_name("Relu");
    assert!(relu[0].is_nan(), "relu(NaN) = NaN");
    assert_eq!(relu[1], INF);
    assert_eq!(relu[3].to_bits(), 0, "relu(−0) = +0");
    let exp = by_name("Exp");
    assert!(exp[0].is_nan());
    assert_eq!((exp[1], exp[2]), (INF, 0.0));
    let clamp = by_name("clamp(x, 0, 6)");
    assert!(clamp[0].is_nan(), "clamp(NaN) = NaN");
    assert_eq!((clamp[1], clamp[2]), (6.0, 0.0));
    let n = BINARY_IN.len();
    let (max, min) = (by_name("Max"), by_name("Min"));
    for i in 0..n * n {
        let (a, b) = (BINARY_IN[i / n], BINARY_IN[i % n]);
        assert_eq!(max[i].is_nan(), a.is_nan() || b.is_nan(), "max({a}, {b})");
        assert_eq!(min[i].is_nan(), a.is_nan() || b.is_nan(), "min({a}, {b})");
    }
}

#[test]
fn elementwise_specials_agree_on_every_path() {
    elementwise_suite().check("spe");
}

/// Rows of the reduction table (13 columns: three vectors and a tail).
fn reduction_rows() -> Vec<Vec<f32>> {
    let l = 13;
    let fill = |v: &[f32]| -> Vec<f32> {
        (0..l)
            .map(|i| v.get(i).copied().unwrap_or(0.25 * i as f32 - 1.0))
            .collect()
    };
    vec![
        fill(&[1.0, 2.0, 3.0, 4.0, 5.0, NAN, 7.0]),
        fill(&[NAN, 9.0, -9.0]),
        fill(&[INF, -INF, 0.0]),
        vec![-INF; l],
        vec![NAN; l],
        (0..l)
            .map(|i| if i % 2 == 0 { -0.0 } else { 0.0 })
            .collect(),
        fill(&[1.0, 2.0, INF, NAN, INF, NAN]),
        fill(&[5.0, -INF, NAN, -INF, NAN]),
        // One large value per row: two of the same sign overflow an f32 sum (the
        // interpreter sums in f64), of opposite signs make it depend on the order.
        fill(&[LARGE, 1.0, DENORMAL, -DENORMAL]),
        fill(&[-LARGE, 2.0, DENORMAL]),
        fill(&[INF, 3.0, INF]),
        fill(&[-INF, 2.0, 1.0]),
    ]
}

fn reduction_suite() -> Suite {
    let mut s = Suite::new();
    let rows = reduction_rows();
    let (r, l) = (rows.len(), rows[0].len());
    let x = s.input(&[r, l], rows.concat());
    for axes in [vec![1], vec![0], vec![0, 1]] {
        for (op, cmp) in [
            (ReduceOp::Max, Cmp::AnyZero),
            (ReduceOp::Min, Cmp::AnyZero),
            (ReduceOp::Sum, Cmp::Approx(1e-5)),
            (ReduceOp::Mean, Cmp::Approx(1e-5)),
            (ReduceOp::ArgMax, Cmp::Exact),
            (ReduceOp::ArgMin, Cmp::Exact),
        ] {
            let y = s.node(
                Op::Reduce {
                    op,
                    axes: axes.clone(),
                },
                vec![x],
            );
            s.output(y, format!("{op:?} over {axes:?}"), cmp);
        }
    }
    let y = s.node(Op::Softmax { axes: vec![1] }, vec![x]);
    s.output(y, "softmax".into(), Cmp::Approx(1e-5));
    // Pools: NaN and ±∞ at a few pixels of a 6×7 image.
    let mut img: Vec<f32> = (0..42).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    for (i, v) in [
        (0, NAN),
        (9, INF),
        (20, -INF),
        (23, NAN),
        (33, -0.0),
        (41, INF),
    ] {
        img[i] = v;
    }
    let p = s.input(&[1, 1, 6, 7], img.clone());
    for border in [Border::Ignore, Border::Constant] {
        let w = WindowAttrs {
            size: vec![1, 1, 3, 3],
            border,
            padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
            stride: Vec::new(),
            dilation: Vec::new(),
            output_shape: Vec::new(),
        };
        let y = s.node(Op::MaxPool(w.clone()), vec![p]);
        s.output(y, format!("max_pool {border:?}"), Cmp::AnyZero);
        let y = s.node(Op::ArgmaxPool(w), vec![p]);
        s.output(y, format!("argmax_pool {border:?}"), Cmp::Exact);
    }
    // A window too big to unroll (a reduction loop), NaN-free and with one.
    let mut clean = img.clone();
    clean[0] = 1.0;
    clean[23] = 2.0;
    for (name, data) in [("global", img), ("global, no NaN", clean)] {
        let p = s.input(&[1, 1, 6, 7], data);
        let w = WindowAttrs {
            size: vec![1, 1, 6, 7],
            border: Border::Ignore,
            padding: vec![(0, 0); 4],
            stride: Vec::new(),
            dilation: Vec::new(),
            output_shape: Vec::new(),
        };
        let y = s.node(Op::MaxPool(w.clone()), vec![p]);
        s.output(y, format!("max_pool {name}"), Cmp::AnyZero);
        let y = s.node(Op::ArgmaxPool(w), vec![p]);
        s.output(y, format!("argmax_pool {name}"), Cmp::Exact);
    }
    s
}

#[test]
fn reductions_and_pools_agree_on_every_path() {
    let s = reduction_suite();
    let out = crate::ir::interp::run(&s.g, &s.inputs).expect("interp");
    let pos = |name: &str| s.what.iter().position(|(w, _)| w == name).expect(name);
    // Row 0 has a NaN at 5, row 6 its first NaN at 3, row 7 at 2: argmax/argmin point at
    // the first NaN (NumPy), max/min are NaN; row 2 holds ±∞ and no NaN.
    let max = f32s(&out[pos("Max over [1]")]).to_vec();
    assert!(max[0].is_nan() && max[4].is_nan() && max[6].is_nan());
    assert_eq!((max[2], max[3]), (INF, -INF));
    let TensorData::I32(am) = &out[pos("ArgMax over [1]")].data else {
        panic!("argmax dtype")
    };
    assert_eq!(
        (am[0], am[1], am[2], am[4], am[6], am[10]),
        (5, 0, 0, 0, 3, 0)
    );
    let TensorData::I32(an) = &out[pos("ArgMin over [1]")].data else {
        panic!("argmin dtype")
    };
    assert_eq!((an[2], an[7], an[11]), (1, 2, 0));
    let sm = f32s(&out[pos("softmax")]);
    let l = reduction_rows()[0].len();
    assert!(sm[2 * l..3 * l].iter().all(|v| v.is_nan()), "+∞ in a row");
    assert!(sm[3 * l..4 * l].iter().all(|v| v.is_nan()), "all −∞");
    assert_eq!(sm[11 * l], 0.0, "−∞ next to finite values gives 0");
    s.check("spr");
}

/// Convolutions whose relu/clamp is fused into the GEMM epilogue (runtime or tiled), and a
/// depthwise conv (direct loops, clamp inline), on inputs holding NaN and ±∞.
#[test]
fn fused_conv_epilogues_agree_on_every_path() {
    let mut s = Suite::new();
    let (c, h, w) = (4, 5, 6);
    let mut img: Vec<f32> = (0..c * h * w)
        .map(|i| ((i * 13) % 17) as f32 * 0.125 - 1.0)
        .collect();
    // One special per pixel, so no window sums +∞ and −∞ (the result would then depend
    // on nothing but IEEE rules anyway, but keeps the expectation readable).
    for (i, v) in [
        (3, NAN),
        (8, INF),
        (40, -INF),
        (57, NAN),
        (77, -0.0),
        (95, INF),
    ] {
        img[i] = v;
    }
    let x = s.input(&[1, c, h, w], img);
    let cout = 8;
    let filt = |k: usize, cin: usize| -> Vec<f32> {
        (0..cout * cin * k * k)
            .map(|i| ((i * 5) % 9) as f32 * 0.25 - 1.1)
            .collect()
    };
    let bias: Vec<f32> = (0..cout).map(|i| i as f32 * 0.1 - 0.3).collect();
    let b = s.konst(&[1, cout], bias);
    let zero = s.konst(&[], vec![0.0]);
    let six = s.konst(&[], vec![6.0]);
    for (k, act) in [(1, "relu"), (1, "clamp"), (3, "relu"), (3, "clamp")] {
        let f = s.konst(&[cout, c, k, k], filt(k, c));
        let attrs = ConvAttrs {
            border: Border::Constant,
            padding: vec![(k / 2, k / 2); 2],
            stride: vec![1, 1],
            dilation: vec![1, 1],
            groups: 1,
            output_shape: Vec::new(),
        };
        let y = s.node(Op::Conv(attrs), vec![x, f, b]);
        let y = if act == "relu" {
            s.node(Op::Unary(UnaryOp::Relu), vec![y])
        } else {
            s.node(Op::Clamp, vec![y, zero, six])
        };
        s.output(y, format!("conv {k}×{k} + {act}"), Cmp::Approx(1e-5));
    }
    let fd = s.konst(&[c, 1, 3, 3], filt(3, 1)[..c * 9].to_vec());
    let bd = s.konst(&[1, c], vec![0.1; c]);
    let attrs = ConvAttrs {
        border: Border::Constant,
        padding: vec![(1, 1); 2],
        stride: vec![1, 1],
        dilation: vec![1, 1],
        groups: 0,
        output_shape: Vec::new(),
    };
    let y = s.node(Op::Conv(attrs), vec![x, fd, bd]);
    let y = s.node(Op::Clamp, vec![y, zero, six]);
    s.output(y, "depthwise 3×3 + clamp".into(), Cmp::Approx(1e-5));
    let out = crate::ir::interp::run(&s.g, &s.inputs).expect("interp");
    assert!(
        out.iter().all(|t| f32s(t).iter().any(|v| v.is_nan())),
        "every case sees a NaN"
    );
    s.check("spc");
}

/// Convs big enough for Winograd F(2×2, 3×3) on the host path (direct on the others).
/// With NaN inputs (and relu fused into the output transform) every path agrees: NaN
/// reaches exactly the outputs whose window holds it. With ±∞ inputs an output that is
/// ±∞ directly may be NaN on the Winograd path (its transforms add and subtract an
/// infinite input's terms: ∞ − ∞), the documented exception; finite outputs agree.
#[test]
fn winograd_conv_agrees_on_every_path() {
    let mut s = Suite::new();
    let (c, h, w, cout) = (64, 12, 12, 16);
    let base: Vec<f32> = (0..c * h * w)
        .map(|i| ((i * 13) % 17) as f32 * 0.125 - 1.0)
        .collect();
    let f = s.konst(
        &[cout, c, 3, 3],
        (0..cout * c * 9)
            .map(|i| ((i * 5) % 9) as f32 * 0.25 - 1.1)
            .collect(),
    );
    let b = s.konst(&[1, cout], vec![0.5; cout]);
    let attrs = ConvAttrs {
        border: Border::Constant,
        padding: vec![(1, 1); 2],
        stride: vec![1, 1],
        dilation: vec![1, 1],
        groups: 1,
        output_shape: Vec::new(),
    };
    for (specials, relu) in [
        (&[(3, NAN), (300, NAN), (777, NAN)][..], true),
        (&[(3, NAN), (70, INF), (300, -INF), (2000, INF)][..], false),
    ] {
        let mut img = base.clone();
        for &(i, v) in specials {
            img[i] = v;
        }
        let x = s.input(&[1, c, h, w], img);
        let y = s.node(Op::Conv(attrs.clone()), vec![x, f, b]);
        if relu {
            let y = s.node(Op::Unary(UnaryOp::Relu), vec![y]);
            s.output(y, "winograd conv + relu, NaN".into(), Cmp::Approx(1e-5));
        } else {
            s.output(
                y,
                "winograd conv, NaN and ±∞".into(),
                Cmp::InfMayBeNan(1e-5),
            );
        }
    }
    let art = crate::back::compile(&s.g, &opts("spw")).expect("compile");
    // The input transform is the runtime's kernel where the target has the runtime's
    // window kernels, loop nests elsewhere.
    assert!(
        art.kernels.contains("wino_in") || art.kernels.contains("winograd_in b"),
        "the host path uses Winograd"
    );
    s.check("spw");
}

/// `x + 0.0` gives +0 for x = −0 (IEEE: −0 + +0 = +0) through the whole pipeline: the
/// front end, the optimizing passes (`simplify` once folded `x + 0` to `x`, keeping −0)
/// and compiled code on every path. `· 2` keeps the sum from being the graph output,
/// which `simplify` never aliases away; it keeps the sign of a zero.
#[test]
fn plus_zero_added_to_minus_zero_is_plus_zero_when_compiled() {
    let src = "version 1.0;\ngraph g(x) -> (y)\n{\n    x = external<scalar>(shape = [6]);\n    \
               t = add(x, 0.0);\n    y = mul(t, 2.0);\n}\n";
    let mut lowered =
        crate::front::lower_source("plus_zero.nnef", src, &|_| None, &Default::default())
            .unwrap_or_else(|e| panic!("{}", e.render()));
    crate::passes::optimize(&mut lowered.graph, &Default::default()).expect("optimizes");
    let ops: Vec<&str> = lowered
        .graph
        .nodes
        .iter()
        .map(|n| n.op.mnemonic())
        .collect();
    assert!(ops.contains(&"add"), "x + 0 was folded away: {ops:?}");
    let x = [-0.0, 0.0, NAN, INF, -INF, -1.5];
    let t = Tensor::f32(vec![6], x.to_vec());
    let want = crate::ir::interp::run(&lowered.graph, std::slice::from_ref(&t)).expect("interp");
    let want = f32s(&want[0]);
    assert_eq!(
        want[0].to_bits(),
        0x0000_0000,
        "interpreter: 2·(−0 + 0) is +0"
    );
    assert_eq!(want[1].to_bits(), 0x0000_0000);
    assert!(want[2].is_nan());
    assert_eq!((want[3], want[4], want[5]), (INF, -INF, -3.0));
    let suite = Suite {
        g: lowered.graph,
        inputs: vec![t],
        what: vec![("2 · (x + 0.0)".into(), Cmp::Exact)],
    };
    suite.check("pz");
}
