//! Tests of the reference interpreter: hand-computed values per op family, adjoint
//! identities for the transposed ops (`<conv(x), y> == <x, deconv(y)>` and likewise for
//! box/debox and sample/desample), broadcasting, and errors for malformed operands.
//! Everything goes through `eval_op`/`run` except the transposed kernels under borders
//! `ir::infer` rejects, which are called directly to show they are still exact adjoints.

use super::{InterpError, eval_op, run};
use crate::ir::graph::Graph;
use crate::ir::op::{
    BinaryOp, Border, ConvAttrs, Op, ReduceOp, ResampleMethod, RoiPoolOp, UnaryOp, WindowAttrs,
};
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};

fn f(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::f32(shape.to_vec(), data.to_vec())
}

fn i(shape: &[usize], data: &[i32]) -> Tensor {
    Tensor::i32(shape.to_vec(), data.to_vec())
}

fn b(shape: &[usize], data: &[bool]) -> Tensor {
    Tensor::bool(shape.to_vec(), data.to_vec())
}

fn scalar(v: f32) -> Tensor {
    f(&[], &[v])
}

/// Evaluates a single-result op.
fn ev(op: Op, inputs: &[&Tensor]) -> Tensor {
    let mut r = eval_op(&op, inputs).unwrap_or_else(|e| panic!("{}: {e}", op.mnemonic()));
    assert_eq!(r.len(), 1);
    r.remove(0)
}

fn err(op: Op, inputs: &[&Tensor]) -> InterpError {
    eval_op(&op, inputs).expect_err("expected an error")
}

#[track_caller]
fn assert_close(got: &Tensor, shape: &[usize], want: &[f32]) {
    assert_eq!(got.shape, shape, "shape");
    let g = got.as_f32().expect("f32 result");
    assert_eq!(g.len(), want.len());
    for (k, (x, y)) in g.iter().zip(want).enumerate() {
        assert!(
            (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-5 * y.abs().max(1.0),
            "element {k}: got {x}, want {y}\n got {g:?}"
        );
    }
}

/// Deterministic pseudo-random values in [-1, 1).
fn random(shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::f32(shape.to_vec(), data)
}

fn inner(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape, b.shape);
    a.as_f32()
        .unwrap()
        .iter()
        .zip(b.as_f32().unwrap())
        .map(|(x, y)| *x as f64 * *y as f64)
        .sum()
}

fn conv_attrs(
    border: Border,
    padding: &[(usize, usize)],
    stride: &[usize],
    dilation: &[usize],
    groups: usize,
) -> ConvAttrs {
    ConvAttrs {
        border,
        padding: padding.to_vec(),
        stride: stride.to_vec(),
        dilation: dilation.to_vec(),
        groups,
        output_shape: Vec::new(),
    }
}

fn window(
    size: &[usize],
    border: Border,
    padding: &[(usize, usize)],
    stride: &[usize],
) -> WindowAttrs {
    WindowAttrs {
        size: size.to_vec(),
        border,
        padding: padding.to_vec(),
        stride: stride.to_vec(),
        dilation: Vec::new(),
        output_shape: Vec::new(),
    }
}

// ---------------------------------------------------------------- element-wise

#[test]
fn unary_functions() {
    let x = f(&[6], &[-2.5, -0.5, 0.5, 1.5, 2.5, 0.0]);
    assert_close(
        &ev(Op::Unary(UnaryOp::Round), &[&x]),
        &[6],
        &[-3.0, -1.0, 1.0, 2.0, 3.0, 0.0],
    );
    assert_close(
        &ev(Op::Unary(UnaryOp::Relu), &[&x]),
        &[6],
        &[0.0, 0.0, 0.5, 1.5, 2.5, 0.0],
    );
    assert_close(
        &ev(Op::Unary(UnaryOp::Sign), &[&x]),
        &[6],
        &[-1.0, -1.0, 1.0, 1.0, 1.0, 0.0],
    );
    let g: Vec<f32> = [-2.5f64, -0.5, 0.5, 1.5, 2.5, 0.0]
        .iter()
        .map(|&v| (v / (1.0 + (-1.702 * v).exp())) as f32)
        .collect();
    assert_close(&ev(Op::Unary(UnaryOp::Gelu), &[&x]), &[6], &g);
    let e: Vec<f32> = [-2.5f64, -0.5]
        .iter()
        .map(|&v| (0.5 * (v.exp() - 1.0)) as f32)
        .chain([0.5, 1.5, 2.5, 0.0])
        .collect();
    assert_close(&ev(Op::Unary(UnaryOp::Elu { alpha: 0.5 }), &[&x]), &[6], &e);
    let s: Vec<f32> = e
        .iter()
        .enumerate()
        .map(|(k, &v)| if k < 2 { v * 4.0 * 3.0 } else { v * 3.0 })
        .collect();
    assert_close(
        &ev(
            Op::Unary(UnaryOp::Selu {
                alpha: 2.0,
                lambda: 3.0,
            }),
            &[&x],
        ),
        &[6],
        &s,
    );
    assert_close(
        &ev(Op::Unary(UnaryOp::LeakyRelu { alpha: 0.1 }), &[&x]),
        &[6],
        &[-0.25, -0.05, 0.5, 1.5, 2.5, 0.0],
    );
    // softplus stays finite where exp overflows.
    assert_close(
        &ev(Op::Unary(UnaryOp::Softplus), &[&f(&[2], &[1000.0, 0.0])]),
        &[2],
        &[1000.0, 2f32.ln()],
    );
    assert_eq!(
        ev(Op::Unary(UnaryOp::Abs), &[&i(&[2], &[-3, 4])]),
        i(&[2], &[3, 4])
    );
    assert_eq!(
        ev(Op::Unary(UnaryOp::Not), &[&b(&[2], &[true, false])]),
        b(&[2], &[false, true])
    );
    assert!(matches!(
        err(Op::Unary(UnaryOp::Exp), &[&i(&[1], &[1])]),
        InterpError::Invalid { op: "exp", .. }
    ));
}

/// Every float unary op on a few points, as text (a regression table; the values were
/// checked against the formulas in spec §3.2 and §4.2 when blessed).
#[test]
fn unary_table() {
    use expect_test::expect;
    let ops = [
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
            alpha: 1.6732632,
            lambda: 1.050701,
        },
        UnaryOp::LeakyRelu { alpha: 0.2 },
    ];
    let x = f(&[5], &[-1.5, -0.5, 0.0, 0.5, 2.0]);
    let mut text = String::new();
    for u in ops {
        let y = ev(Op::Unary(u), &[&x]);
        let cells: Vec<String> = y
            .as_f32()
            .unwrap()
            .iter()
            .map(|v| format!("{v:>10.5}"))
            .collect();
        text += &format!("{:<10} {}\n", Op::Unary(u).mnemonic(), cells.join(" "));
    }
    expect![[r#"
        neg           1.50000    0.50000   -0.00000   -0.50000   -2.00000
        rcp          -0.66667   -2.00000        inf    2.00000    0.50000
        exp           0.22313    0.60653    1.00000    1.64872    7.38906
        log               NaN        NaN       -inf   -0.69315    0.69315
        sin          -0.99749   -0.47943    0.00000    0.47943    0.90930
        cos           0.07074    0.87758    1.00000    0.87758   -0.41615
        tan         -14.10142   -0.54630    0.00000    0.54630   -2.18504
        asin              NaN   -0.52360    0.00000    0.52360        NaN
        acos              NaN    2.09440    1.57080    1.04720        NaN
        atan         -0.98279   -0.46365    0.00000    0.46365    1.10715
        sinh         -2.12928   -0.52110    0.00000    0.52110    3.62686
        cosh          2.35241    1.12763    1.00000    1.12763    3.76220
        tanh         -0.90515   -0.46212    0.00000    0.46212    0.96403
        asinh        -1.19476   -0.48121    0.00000    0.48121    1.44364
        acosh             NaN        NaN        NaN        NaN    1.31696
        atanh             NaN   -0.54931    0.00000    0.54931        NaN
        abs           1.50000    0.50000    0.00000    0.50000    2.00000
        sign         -1.00000   -1.00000    0.00000    1.00000    1.00000
        floor        -2.00000   -1.00000    0.00000    0.00000    2.00000
        ceil         -1.00000   -0.00000    0.00000    1.00000    2.00000
        round        -2.00000   -1.00000    0.00000    1.00000    2.00000
        sqr           2.25000    0.25000    0.00000    0.25000    4.00000
        sqrt              NaN        NaN    0.00000    0.70711    1.41421
        rsqr          0.44444    4.00000        inf    4.00000    0.25000
        rsqrt             NaN        NaN        inf    1.41421    0.70711
        log2              NaN        NaN       -inf   -1.00000    1.00000
        relu          0.00000    0.00000    0.00000    0.50000    2.00000
        sigmoid       0.18243    0.37754    0.50000    0.62246    0.88080
        softplus      0.20141    0.47408    0.69315    0.97408    2.12693
        silu         -0.27364   -0.18877    0.00000    0.31123    1.76159
        gelu         -0.10834   -0.14961    0.00000    0.35039    1.93566
        elu          -0.77687   -0.39347    0.00000    0.50000    2.00000
        selu         -1.36581   -0.69176    0.00000    0.52535    2.10140
        leaky_relu   -0.30000   -0.10000    0.00000    0.50000    2.00000
    "#]]
    .assert_eq(&text);
}

#[test]
fn broadcasting_is_left_aligned() {
    let x = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // [2] aligns with the first dim, not the last (NNEF, not NumPy).
    let y = f(&[2], &[10.0, 20.0]);
    assert_close(
        &ev(Op::Binary(BinaryOp::Add), &[&x, &y]),
        &[2, 3],
        &[11.0, 12.0, 13.0, 24.0, 25.0, 26.0],
    );
    let col = f(&[1, 3], &[1.0, 0.0, -1.0]);
    let row = f(&[2, 1], &[2.0, 3.0]);
    assert_close(
        &ev(Op::Binary(BinaryOp::Mul), &[&row, &col]),
        &[2, 3],
        &[2.0, 0.0, -2.0, 3.0, 0.0, -3.0],
    );
    assert_close(
        &ev(Op::Binary(BinaryOp::Sub), &[&scalar(1.0), &x]),
        &[2, 3],
        &[0.0, -1.0, -2.0, -3.0, -4.0, -5.0],
    );
    assert_eq!(
        ev(Op::Binary(BinaryOp::Lt), &[&x, &f(&[], &[3.0])]),
        b(&[2, 3], &[true, true, false, false, false, false])
    );
    let bad = f(&[3], &[1.0, 2.0, 3.0]);
    assert!(matches!(
        err(Op::Binary(BinaryOp::Add), &[&x, &bad]),
        InterpError::Invalid { op: "add", .. }
    ));
}

#[test]
fn binary_dtypes() {
    let x = i(&[4], &[7, -7, 2, 3]);
    let y = i(&[4], &[2, 2, -1, 2]);
    assert_eq!(
        ev(Op::Binary(BinaryOp::Div), &[&x, &y]),
        i(&[4], &[3, -3, -2, 1])
    );
    assert_eq!(
        ev(Op::Binary(BinaryOp::Pow), &[&x, &y]),
        i(&[4], &[49, 49, 0, 9])
    );
    assert_eq!(
        ev(Op::Binary(BinaryOp::Ge), &[&x, &y]),
        b(&[4], &[true, false, true, true])
    );
    let z = i(&[1], &[0]);
    assert!(matches!(
        err(Op::Binary(BinaryOp::Div), &[&x, &z]),
        InterpError::Invalid { op: "div", .. }
    ));
    let p = b(&[2], &[true, false]);
    let q = b(&[2], &[true, true]);
    assert_eq!(
        ev(Op::Binary(BinaryOp::And), &[&p, &q]),
        b(&[2], &[true, false])
    );
    assert_eq!(
        ev(Op::Binary(BinaryOp::Or), &[&p, &q]),
        b(&[2], &[true, true])
    );
    assert_close(
        &ev(
            Op::Binary(BinaryOp::Pow),
            &[&f(&[2], &[2.0, 9.0]), &f(&[2], &[3.0, 0.5])],
        ),
        &[2],
        &[8.0, 3.0],
    );
    // Mixed dtypes and logical ops on numbers are rejected.
    assert!(eval_op(&Op::Binary(BinaryOp::Add), &[&x, &f(&[4], &[0.0; 4])]).is_err());
    assert!(eval_op(&Op::Binary(BinaryOp::And), &[&x, &y]).is_err());
}

#[test]
fn select_clamp_cast_batch_norm() {
    let c = b(&[2, 1], &[true, false]);
    let t = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    assert_close(
        &ev(Op::Select, &[&c, &t, &scalar(0.0)]),
        &[2, 2],
        &[1.0, 2.0, 0.0, 0.0],
    );
    let x = f(&[4], &[-2.0, 0.5, 3.0, f32::NAN]);
    let r = ev(Op::Clamp, &[&x, &scalar(-1.0), &scalar(1.0)]);
    // clamp = max(min(x, b), a) with IEEE maximum/minimum: NaN propagates.
    assert_close(&r, &[4], &[-1.0, 0.5, 1.0, f32::NAN]);
    assert_eq!(
        ev(Op::Cast { to: DType::I32 }, &[&f(&[3], &[-1.7, 2.9, 0.0])]),
        i(&[3], &[-1, 2, 0])
    );
    assert_eq!(
        ev(Op::Cast { to: DType::Bool }, &[&f(&[2], &[0.0, -0.1])]),
        b(&[2], &[false, true])
    );
    assert_close(
        &ev(Op::Cast { to: DType::F32 }, &[&b(&[2], &[true, false])]),
        &[2],
        &[1.0, 0.0],
    );
    let input = f(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let mean = f(&[1, 2], &[1.0, 3.0]);
    let var = f(&[1, 2], &[4.0, 0.25]);
    let off = f(&[1, 2], &[0.0, 10.0]);
    let scale = f(&[1, 2], &[2.0, 1.0]);
    let bn = ev(
        Op::BatchNorm { epsilon: 0.0 },
        &[&input, &mean, &var, &off, &scale],
    );
    assert_close(&bn, &[1, 2, 2], &[0.0, 1.0, 10.0, 12.0]);
    // Parameters must broadcast *to* the input.
    let wide = f(&[2, 2], &[0.0; 4]);
    assert!(
        eval_op(
            &Op::BatchNorm { epsilon: 0.0 },
            &[&input, &wide, &var, &off, &scale]
        )
        .is_err()
    );
}

// ---------------------------------------------------------------- sliding windows

#[test]
fn conv_single_channel_4x4() {
    // x[r][c] = 4r + c; filter picks 1·centre − 1·right neighbour + 2·bottom neighbour.
    let x = f(
        &[1, 1, 4, 4],
        &(0..16).map(|v| v as f32).collect::<Vec<_>>(),
    );
    let w = f(
        &[1, 1, 3, 3],
        &[0.0, 0.0, 0.0, 0.0, 1.0, -1.0, 0.0, 2.0, 0.0],
    );
    let valid = ev(
        Op::Conv(conv_attrs(Border::Constant, &[(0, 0), (0, 0)], &[], &[], 1)),
        &[&x, &w, &scalar(0.5)],
    );
    // At centre (r, c): v - (v + 1) + 2(v + 4) + 0.5 = 2v + 7.5 with v = 4r + c.
    assert_close(&valid, &[1, 1, 2, 2], &[17.5, 19.5, 25.5, 27.5]);
    // Auto padding keeps 4x4 ('SAME'); outside reads 0.
    let same = ev(
        Op::Conv(conv_attrs(Border::Constant, &[], &[], &[], 1)),
        &[&x, &w, &scalar(0.0)],
    );
    assert_close(
        &same,
        &[1, 1, 4, 4],
        &[
            7.0, 9.0, 11.0, 17.0, 15.0, 17.0, 19.0, 29.0, 23.0, 25.0, 27.0, 41.0, -1.0, -1.0, -1.0,
            15.0,
        ],
    );
    // Stride 2 with explicit padding: rows/cols 0 and 2 of the 'SAME' result above.
    let strided = ev(
        Op::Conv(conv_attrs(
            Border::Constant,
            &[(1, 1), (1, 1)],
            &[2, 2],
            &[],
            1,
        )),
        &[&x, &w, &scalar(0.0)],
    );
    assert_close(&strided, &[1, 1, 2, 2], &[7.0, 11.0, 23.0, 27.0]);
}

#[test]
fn conv_groups_depthwise_and_bias() {
    // Two channels, depthwise 1x1 filters scaling by 2 and 3, bias [1, 2].
    let x = f(&[1, 2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
    let w = f(&[2, 1, 1, 1], &[2.0, 3.0]);
    let bias = f(&[1, 2], &[0.5, -0.5]);
    let out = ev(
        Op::Conv(conv_attrs(Border::Constant, &[], &[], &[], 0)),
        &[&x, &w, &bias],
    );
    assert_close(&out, &[1, 2, 1, 2], &[2.5, 4.5, 8.5, 11.5]);
    // groups = 1 sums over channels.
    let w1 = f(&[1, 2, 1, 1], &[1.0, 10.0]);
    let out = ev(
        Op::Conv(conv_attrs(Border::Constant, &[], &[], &[], 1)),
        &[&x, &w1, &scalar(0.0)],
    );
    assert_close(&out, &[1, 1, 1, 2], &[31.0, 42.0]);
    // Dilation 2 on a 1-d signal: taps at x and x+2.
    let s = f(&[1, 1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let k = f(&[1, 1, 2], &[1.0, 1.0]);
    let out = ev(
        Op::Conv(conv_attrs(Border::Constant, &[(0, 0)], &[], &[2], 1)),
        &[&s, &k, &scalar(0.0)],
    );
    assert_close(&out, &[1, 1, 3], &[4.0, 6.0, 8.0]);
}

#[test]
fn conv_borders_equal_conv_of_padded_input() {
    let x = random(&[1, 2, 5, 4], 1);
    let w = random(&[3, 2, 3, 2], 2);
    let padding = [(2, 1), (1, 0)];
    for border in [
        Border::Constant,
        Border::Replicate,
        Border::Reflect,
        Border::ReflectEven,
    ] {
        let direct = ev(
            Op::Conv(conv_attrs(border, &padding, &[1, 2], &[1, 1], 1)),
            &[&x, &w, &scalar(0.25)],
        );
        let pad = Op::Pad {
            padding: vec![(0, 0), (0, 0), padding[0], padding[1]],
            border,
            value: 0.0,
        };
        let padded = ev(pad, &[&x]);
        let via_pad = ev(
            Op::Conv(conv_attrs(
                Border::Constant,
                &[(0, 0), (0, 0)],
                &[1, 2],
                &[1, 1],
                1,
            )),
            &[&padded, &w, &scalar(0.25)],
        );
        assert_close(&direct, &via_pad.shape, via_pad.as_f32().unwrap());
    }
}

#[test]
fn pad_borders() {
    let x = f(&[3], &[1.0, 2.0, 3.0]);
    let pad = |border, value| {
        ev(
            Op::Pad {
                padding: vec![(2, 2)],
                border,
                value,
            },
            &[&x],
        )
    };
    assert_close(
        &pad(Border::Constant, 9.0),
        &[7],
        &[9.0, 9.0, 1.0, 2.0, 3.0, 9.0, 9.0],
    );
    assert_close(
        &pad(Border::Replicate, 0.0),
        &[7],
        &[1.0, 1.0, 1.0, 2.0, 3.0, 3.0, 3.0],
    );
    assert_close(
        &pad(Border::Reflect, 0.0),
        &[7],
        &[3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0],
    );
    assert_close(
        &pad(Border::ReflectEven, 0.0),
        &[7],
        &[2.0, 1.0, 1.0, 2.0, 3.0, 3.0, 2.0],
    );
    // Reflecting further than the extent allows is an error, not a wrap.
    assert!(
        eval_op(
            &Op::Pad {
                padding: vec![(3, 0)],
                border: Border::Reflect,
                value: 0.0
            },
            &[&x]
        )
        .is_err()
    );
    assert!(
        eval_op(
            &Op::Pad {
                padding: vec![(1, 1)],
                border: Border::Ignore,
                value: 0.0
            },
            &[&x]
        )
        .is_err()
    );
}

#[test]
fn pooling_border_modes() {
    let x = f(&[1, 1, 4], &[-1.0, -2.0, -3.0, -4.0]);
    let w = |border| window(&[1, 1, 3], border, &[(0, 0), (0, 0), (1, 1)], &[]);
    let max = |border| ev(Op::MaxPool(w(border)), &[&x]);
    // constant: the outside zeros take part in the max.
    assert_close(&max(Border::Constant), &[1, 1, 4], &[0.0, -1.0, -2.0, 0.0]);
    assert_close(&max(Border::Ignore), &[1, 1, 4], &[-1.0, -1.0, -2.0, -3.0]);
    assert_close(
        &max(Border::Replicate),
        &[1, 1, 4],
        &[-1.0, -1.0, -2.0, -3.0],
    );
    assert_close(&max(Border::Reflect), &[1, 1, 4], &[-1.0, -1.0, -2.0, -3.0]);
    let avg = |border| {
        ev(
            Op::Box {
                window: w(border),
                normalize: true,
            },
            &[&x],
        )
    };
    assert_close(
        &avg(Border::Constant),
        &[1, 1, 4],
        &[-1.0, -2.0, -3.0, -7.0 / 3.0],
    );
    assert_close(&avg(Border::Ignore), &[1, 1, 4], &[-1.5, -2.0, -3.0, -3.5]);
    assert_close(
        &avg(Border::Replicate),
        &[1, 1, 4],
        &[-4.0 / 3.0, -2.0, -3.0, -11.0 / 3.0],
    );
    assert_close(
        &avg(Border::ReflectEven),
        &[1, 1, 4],
        &[-4.0 / 3.0, -2.0, -3.0, -11.0 / 3.0],
    );
    let sum = ev(
        Op::Box {
            window: w(Border::Ignore),
            normalize: false,
        },
        &[&x],
    );
    assert_close(&sum, &[1, 1, 4], &[-3.0, -6.0, -9.0, -7.0]);
    // 2x2 stride 2 max pool, auto padding.
    let y = f(&[1, 1, 2, 4], &[1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 8.0, 7.0]);
    let p = ev(
        Op::MaxPool(window(&[1, 1, 2, 2], Border::Ignore, &[], &[1, 1, 2, 2])),
        &[&y],
    );
    assert_close(&p, &[1, 1, 1, 2], &[5.0, 8.0]);
}

#[test]
fn argmax_pool_and_sample() {
    let x = f(&[1, 1, 2, 4], &[1.0, 5.0, 2.0, 8.0, 5.0, 4.0, 8.0, 7.0]);
    let w = window(&[1, 1, 2, 2], Border::Ignore, &[], &[1, 1, 2, 2]);
    let idx = ev(Op::ArgmaxPool(w.clone()), &[&x]);
    // Window offsets are row-major inside the 2x2 window; the first maximum wins ties.
    assert_eq!(idx, i(&[1, 1, 1, 2], &[1, 1]));
    let s = ev(Op::Sample(w.clone()), &[&x, &idx]);
    assert_close(&s, &[1, 1, 1, 2], &[5.0, 8.0]);
    // max_pool == sample(argmax_pool).
    assert_eq!(ev(Op::MaxPool(w.clone()), &[&x]), s);
    // With a constant border the outside 0 can win.
    let neg = f(&[1, 1, 3], &[-3.0, -1.0, -2.0]);
    let wc = window(&[1, 1, 3], Border::Constant, &[(0, 0), (0, 0), (1, 1)], &[]);
    assert_eq!(ev(Op::ArgmaxPool(wc), &[&neg]), i(&[1, 1, 3], &[0, 1, 2]));
    // Index outside the window is an error.
    let bad = i(&[1, 1, 1, 2], &[0, 4]);
    assert!(eval_op(&Op::Sample(w), &[&x, &bad]).is_err());
}

#[test]
fn deconv_is_adjoint_of_conv() {
    // border, padding, stride, dilation, groups, input shape, filter shape
    type Case = (
        Border,
        &'static [(usize, usize)],
        &'static [usize],
        &'static [usize],
        usize,
        [usize; 4],
        [usize; 4],
    );
    let cases: [Case; 6] = [
        (
            Border::Constant,
            &[(1, 1), (1, 1)],
            &[1, 1],
            &[1, 1],
            1,
            [2, 3, 5, 6],
            [4, 3, 3, 3],
        ),
        (
            Border::Constant,
            &[(1, 0), (2, 1)],
            &[2, 2],
            &[1, 2],
            1,
            [1, 2, 7, 8],
            [3, 2, 3, 2],
        ),
        (
            Border::Ignore,
            &[],
            &[2, 3],
            &[1, 1],
            1,
            [1, 2, 6, 7],
            [2, 2, 3, 3],
        ),
        (
            Border::Constant,
            &[(1, 1), (0, 0)],
            &[1, 2],
            &[2, 1],
            2,
            [1, 4, 6, 5],
            [6, 2, 3, 2],
        ),
        (
            Border::Constant,
            &[],
            &[2, 2],
            &[1, 1],
            0,
            [1, 3, 5, 5],
            [6, 1, 3, 3],
        ),
        // `infer` admits only constant/ignore for transposed ops; the kernel is still the
        // exact adjoint for the other borders (checked by calling it directly below).
        (
            Border::Replicate,
            &[(2, 1), (1, 1)],
            &[1, 2],
            &[1, 1],
            1,
            [1, 2, 5, 6],
            [3, 2, 3, 3],
        ),
    ];
    for (k, (border, padding, stride, dilation, groups, xs, ws)) in cases.into_iter().enumerate() {
        let x = random(&xs, 10 + k as u64);
        let w = random(&ws, 20 + k as u64);
        let attrs = conv_attrs(border, padding, stride, dilation, groups);
        let cx = ev(Op::Conv(attrs.clone()), &[&x, &w, &scalar(0.0)]);
        let y = random(&cx.shape, 30 + k as u64);
        let mut dattrs = attrs.clone();
        // With groups = 0 the deconv takes G from output_shape[1], as the spec says.
        dattrs.output_shape = xs.to_vec();
        let dy = if matches!(border, Border::Constant | Border::Ignore) {
            ev(Op::Deconv(dattrs), &[&y, &w, &scalar(0.0)])
        } else {
            assert!(eval_op(&Op::Deconv(dattrs.clone()), &[&y, &w, &scalar(0.0)]).is_err());
            super::window::deconv(&dattrs, &y, &w, &scalar(0.0), &xs).unwrap()
        };
        assert_eq!(dy.shape, xs);
        let (lhs, rhs) = (inner(&cx, &y), inner(&x, &dy));
        assert!(
            (lhs - rhs).abs() < 1e-4 * lhs.abs().max(1.0),
            "case {k}: {lhs} vs {rhs}"
        );
    }
}

#[test]
fn deconv_values_and_shapes() {
    // 1-d, stride 2, kernel [1, 2, 3], no padding: o = (2−1)·2 + 3 = 5.
    let x = f(&[1, 1, 2], &[1.0, 10.0]);
    let w = f(&[1, 1, 3], &[1.0, 2.0, 3.0]);
    let out = ev(
        Op::Deconv(conv_attrs(Border::Constant, &[(0, 0)], &[2], &[], 1)),
        &[&x, &w, &scalar(1.0)],
    );
    assert_close(&out, &[1, 1, 5], &[2.0, 3.0, 14.0, 21.0, 31.0]);
    // Auto padding doubles the extent with stride 2.
    let out = ev(
        Op::Deconv(conv_attrs(Border::Constant, &[], &[2], &[], 1)),
        &[&x, &w, &scalar(0.0)],
    );
    assert_eq!(out.shape, [1, 1, 4]);
}

#[test]
fn debox_and_desample_are_adjoints() {
    for (k, border) in [
        Border::Constant,
        Border::Ignore,
        Border::Replicate,
        Border::Reflect,
    ]
    .into_iter()
    .enumerate()
    {
        let x = random(&[1, 2, 7, 6], 40 + k as u64);
        let mut w = window(
            &[1, 1, 3, 2],
            border,
            &[(0, 0), (0, 0), (1, 1), (1, 0)],
            &[1, 1, 2, 1],
        );
        for normalize in [false, true] {
            let bx = ev(
                Op::Box {
                    window: w.clone(),
                    normalize,
                },
                &[&x],
            );
            let y = random(&bx.shape, 50 + k as u64);
            let mut dw = w.clone();
            dw.output_shape = x.shape.clone();
            let dy = if matches!(border, Border::Constant | Border::Ignore) {
                ev(
                    Op::Debox {
                        window: dw,
                        normalize,
                    },
                    &[&y],
                )
            } else {
                super::window::debox(&dw, normalize, &y, &x.shape).unwrap()
            };
            let (lhs, rhs) = (inner(&bx, &y), inner(&x, &dy));
            assert!(
                (lhs - rhs).abs() < 1e-4 * lhs.abs().max(1.0),
                "box {border:?} {normalize}: {lhs} vs {rhs}"
            );
        }
        let idx_shape = ev(
            Op::Box {
                window: w.clone(),
                normalize: false,
            },
            &[&x],
        )
        .shape;
        let count: usize = idx_shape.iter().product();
        let idx = Tensor::i32(
            idx_shape.clone(),
            (0..count).map(|n| ((n * 7 + k) % 6) as i32).collect(),
        );
        let sx = ev(Op::Sample(w.clone()), &[&x, &idx]);
        let y = random(&sx.shape, 60 + k as u64);
        w.output_shape = x.shape.clone();
        let dy = if matches!(border, Border::Constant | Border::Ignore) {
            ev(Op::Desample(w.clone()), &[&y, &idx])
        } else {
            super::window::desample(&w, &y, &idx, &x.shape).unwrap()
        };
        let (lhs, rhs) = (inner(&sx, &y), inner(&x, &dy));
        assert!(
            (lhs - rhs).abs() < 1e-4 * lhs.abs().max(1.0),
            "sample {border:?}: {lhs} vs {rhs}"
        );
    }
}

#[test]
fn nearest_upsample_via_debox() {
    // stdlib nearest_upsample = debox(size = stride = factor, zero padding).
    let x = f(&[1, 1, 2], &[1.0, 2.0]);
    let w = window(
        &[1, 1, 2],
        Border::Constant,
        &[(0, 0), (0, 0), (0, 0)],
        &[1, 1, 2],
    );
    let out = ev(
        Op::Debox {
            window: w,
            normalize: false,
        },
        &[&x],
    );
    assert_close(&out, &[1, 1, 4], &[1.0, 1.0, 2.0, 2.0]);
}

// ---------------------------------------------------------------- resampling

#[test]
fn multilinear_upsample_methods() {
    let x = f(&[1, 1, 4], &[1.0, 2.0, 3.0, 4.0]);
    let up = |method, border| {
        ev(
            Op::MultilinearUpsample {
                factor: vec![2],
                method,
                border,
            },
            &[&x],
        )
    };
    assert_close(
        &up(ResampleMethod::Symmetric, Border::Replicate),
        &[1, 1, 8],
        &[1.0, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4.0],
    );
    assert_close(
        &up(ResampleMethod::Symmetric, Border::Constant),
        &[1, 1, 8],
        &[0.75, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 3.0],
    );
    assert_close(
        &up(ResampleMethod::Asymmetric, Border::Replicate),
        &[1, 1, 8],
        &[1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.0],
    );
    assert_close(
        &up(ResampleMethod::Asymmetric, Border::Constant),
        &[1, 1, 8],
        &[1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 2.0],
    );
    let a: Vec<f32> = (0..8).map(|j| 1.0 + j as f32 * 3.0 / 7.0).collect();
    assert_close(
        &up(ResampleMethod::Aligned, Border::Replicate),
        &[1, 1, 8],
        &a,
    );
}

#[test]
fn multilinear_upsample_matches_reference_deconv_kernels() {
    // The reference runtime computes factor-2 upsampling (constant border) as a depthwise
    // deconv with kernel [¼, ¾, ¾, ¼] (symmetric) or [½, 1, ½] (asymmetric), padding (1, 1).
    let x = random(&[1, 2, 3, 4], 70);
    for (method, k) in [
        (ResampleMethod::Symmetric, vec![0.25, 0.75, 0.75, 0.25]),
        (ResampleMethod::Asymmetric, vec![0.5, 1.0, 0.5]),
    ] {
        let n = k.len();
        let w2: Vec<f32> = (0..2)
            .flat_map(|_| k.iter().flat_map(|a| k.iter().map(move |b| a * b)))
            .collect();
        let w = f(&[2, 1, n, n], &w2);
        let mut attrs = conv_attrs(Border::Constant, &[(1, 1), (1, 1)], &[2, 2], &[], 0);
        attrs.output_shape = vec![1, 2, 6, 8];
        let via_deconv = ev(Op::Deconv(attrs), &[&x, &w, &scalar(0.0)]);
        let up = ev(
            Op::MultilinearUpsample {
                factor: vec![2, 2],
                method,
                border: Border::Constant,
            },
            &[&x],
        );
        assert_close(&up, &via_deconv.shape, via_deconv.as_f32().unwrap());
    }
}

#[test]
fn roi_ops() {
    // 1x1x4x4 ramp, one region covering the top-left 2x4 (rows 0..2, cols 0..4).
    let x = f(
        &[1, 1, 4, 4],
        &(0..16).map(|v| v as f32).collect::<Vec<_>>(),
    );
    let rois = f(&[1, 4], &[0.0, 0.0, 2.0, 4.0]);
    let bi = i(&[1], &[0]);
    let avg = ev(
        Op::RoiPool {
            op: RoiPoolOp::Avg,
            output_size: vec![1, 2],
        },
        &[&x, &rois, &bi],
    );
    assert_close(
        &avg,
        &[1, 1, 1, 2],
        &[(0.0 + 1.0 + 4.0 + 5.0) / 4.0, (2.0 + 3.0 + 6.0 + 7.0) / 4.0],
    );
    let max = ev(
        Op::RoiPool {
            op: RoiPoolOp::Max,
            output_size: vec![2, 1],
        },
        &[&x, &rois, &bi],
    );
    assert_close(&max, &[1, 1, 2, 1], &[3.0, 7.0]);
    // Resampling the whole input equals multilinear_upsample.
    let whole = f(&[1, 4], &[0.0, 0.0, 4.0, 4.0]);
    let r = ev(
        Op::RoiResample {
            output_size: vec![8, 8],
            method: ResampleMethod::Symmetric,
        },
        &[&x, &whole, &bi],
    );
    let up = ev(
        Op::MultilinearUpsample {
            factor: vec![2, 2],
            method: ResampleMethod::Symmetric,
            border: Border::Replicate,
        },
        &[&x],
    );
    assert_close(&r, &up.shape, up.as_f32().unwrap());
    let bad_batch = i(&[1], &[1]);
    assert!(
        eval_op(
            &Op::RoiPool {
                op: RoiPoolOp::Avg,
                output_size: vec![1, 1]
            },
            &[&x, &rois, &bad_batch]
        )
        .is_err()
    );
}

// ---------------------------------------------------------------- reductions, contractions

#[test]
fn reductions() {
    let x = f(&[2, 3], &[3.0, 1.0, 3.0, -1.0, 5.0, 5.0]);
    let red = |op, axes: &[usize]| {
        ev(
            Op::Reduce {
                op,
                axes: axes.to_vec(),
            },
            &[&x],
        )
    };
    assert_close(&red(ReduceOp::Sum, &[1]), &[2, 1], &[7.0, 9.0]);
    assert_close(&red(ReduceOp::Mean, &[0, 1]), &[1, 1], &[16.0 / 6.0]);
    assert_close(&red(ReduceOp::Max, &[0]), &[1, 3], &[3.0, 5.0, 5.0]);
    assert_close(&red(ReduceOp::Min, &[1]), &[2, 1], &[1.0, -1.0]);
    // First index on ties; multi-axis index is row-major over the reduced axes.
    assert_eq!(red(ReduceOp::ArgMax, &[1]), i(&[2, 1], &[0, 1]));
    assert_eq!(red(ReduceOp::ArgMax, &[0, 1]), i(&[1, 1], &[4]));
    assert_eq!(red(ReduceOp::ArgMin, &[0]), i(&[1, 3], &[1, 0, 0]));
    let p = b(&[2, 2], &[true, false, true, true]);
    assert_eq!(
        ev(
            Op::Reduce {
                op: ReduceOp::Any,
                axes: vec![1]
            },
            &[&p]
        ),
        b(&[2, 1], &[true, true])
    );
    assert_eq!(
        ev(
            Op::Reduce {
                op: ReduceOp::All,
                axes: vec![1]
            },
            &[&p]
        ),
        b(&[2, 1], &[false, true])
    );
    assert!(
        eval_op(
            &Op::Reduce {
                op: ReduceOp::Sum,
                axes: vec![2]
            },
            &[&x]
        )
        .is_err()
    );
}

#[test]
fn softmax_rows() {
    let x = random(&[3, 5], 80);
    let s = ev(Op::Softmax { axes: vec![1] }, &[&x]);
    let (xs, ss) = (x.as_f32().unwrap(), s.as_f32().unwrap());
    for r in 0..3 {
        let row = &xs[r * 5..r * 5 + 5];
        let denom: f64 = row.iter().map(|&v| (v as f64).exp()).sum();
        let sum: f32 = ss[r * 5..r * 5 + 5].iter().sum();
        assert!((sum - 1.0).abs() < 1e-6);
        for c in 0..5 {
            let want = (row[c] as f64).exp() / denom;
            assert!((ss[r * 5 + c] as f64 - want).abs() < 1e-6);
        }
    }
    // Joint over two axes, and stable for large inputs.
    let big = f(&[1, 2, 2], &[1000.0, 1000.0, 1000.0, 1000.0]);
    assert_close(
        &ev(Op::Softmax { axes: vec![1, 2] }, &[&big]),
        &[1, 2, 2],
        &[0.25; 4],
    );
}

#[test]
fn matmul_and_linear() {
    let a = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let bm = f(&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    assert_close(
        &ev(
            Op::MatMul {
                transpose_a: false,
                transpose_b: false,
            },
            &[&a, &bm],
        ),
        &[2, 2],
        &[4.0, 5.0, 10.0, 11.0],
    );
    // Aᵀ·A is 3x3.
    let ata = ev(
        Op::MatMul {
            transpose_a: true,
            transpose_b: false,
        },
        &[&a, &a],
    );
    assert_close(
        &ata,
        &[3, 3],
        &[17.0, 22.0, 27.0, 22.0, 29.0, 36.0, 27.0, 36.0, 45.0],
    );
    let aat = ev(
        Op::MatMul {
            transpose_a: false,
            transpose_b: true,
        },
        &[&a, &a],
    );
    assert_close(&aat, &[2, 2], &[14.0, 32.0, 32.0, 77.0]);
    // Batch broadcasting: [2,1,2,2] x [1,3,2,2] → [2,3,2,2].
    let l = random(&[2, 1, 2, 2], 90);
    let r = random(&[1, 3, 2, 2], 91);
    let out = ev(
        Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        &[&l, &r],
    );
    assert_eq!(out.shape, [2, 3, 2, 2]);
    let (lv, rv, ov) = (
        l.as_f32().unwrap(),
        r.as_f32().unwrap(),
        out.as_f32().unwrap(),
    );
    let want = lv[4] * rv[8 + 1] + lv[5] * rv[8 + 3]; // batch (1, 2), element (0, 1)
    assert!((ov[(3 + 2) * 4 + 1] - want).abs() < 1e-6);
    assert!(
        eval_op(
            &Op::MatMul {
                transpose_a: false,
                transpose_b: false
            },
            &[&a, &a]
        )
        .is_err()
    );
    let lin = ev(
        Op::Linear,
        &[&a, &f(&[1, 3], &[1.0, 1.0, 1.0]), &f(&[1, 1], &[0.5])],
    );
    assert_close(&lin, &[2, 1], &[6.5, 15.5]);
}

// ---------------------------------------------------------------- data movement

#[test]
fn slice_rules() {
    let x = f(&[5], &[0.0, 1.0, 2.0, 3.0, 4.0]);
    let sl = |b: i64, e: i64, s: i64| {
        eval_op(
            &Op::Slice {
                axes: vec![0],
                begin: vec![b],
                end: vec![e],
                stride: vec![s],
            },
            &[&x],
        )
    };
    assert_close(&sl(1, 0, 1).unwrap()[0], &[4], &[1.0, 2.0, 3.0, 4.0]); // end 0 with stride 1 = to the end
    assert_close(&sl(-1, -6, -2).unwrap()[0], &[3], &[4.0, 2.0, 0.0]); // runs down to index 0
    assert_close(&sl(3, 0, -1).unwrap()[0], &[3], &[3.0, 2.0, 1.0]);
    assert_close(&sl(0, 5, 2).unwrap()[0], &[3], &[0.0, 2.0, 4.0]);
    assert_close(&sl(-2, 10, 1).unwrap()[0], &[2], &[3.0, 4.0]);
    assert!(sl(0, 2, 0).is_err());
    assert!(sl(3, 1, 1).is_err());
    let m = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let s = ev(
        Op::Slice {
            axes: vec![1],
            begin: vec![2],
            end: vec![-4],
            stride: vec![-1],
        },
        &[&m],
    );
    assert_close(&s, &[2, 3], &[3.0, 2.0, 1.0, 6.0, 5.0, 4.0]);
}

#[test]
fn shape_ops() {
    let x = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_close(
        &ev(Op::Transpose { axes: vec![1, 0] }, &[&x]),
        &[3, 2],
        &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0],
    );
    let r = ev(
        Op::Reshape {
            shape: vec![0, -1, 1],
            axis_start: 0,
            axis_count: -1,
        },
        &[&x],
    );
    assert_eq!(r.shape, [2, 3, 1]);
    assert_eq!(
        ev(
            Op::Reshape {
                shape: vec![3, 1],
                axis_start: 1,
                axis_count: 1
            },
            &[&x]
        )
        .shape,
        [2, 3, 1]
    );
    assert!(
        eval_op(
            &Op::Reshape {
                shape: vec![4, -1],
                axis_start: 0,
                axis_count: -1
            },
            &[&x]
        )
        .is_err()
    );
    assert_eq!(ev(Op::Squeeze { axes: vec![2] }, &[&r]).shape, [2, 3]);
    assert!(eval_op(&Op::Squeeze { axes: vec![1] }, &[&r]).is_err());
    assert_eq!(
        ev(Op::Unsqueeze { axes: vec![0, 3] }, &[&x]).shape,
        [1, 2, 3, 1]
    );
    let parts = eval_op(
        &Op::Split {
            axis: 1,
            ratios: vec![1, 2],
        },
        &[&x],
    )
    .unwrap();
    assert_close(&parts[0], &[2, 1], &[1.0, 4.0]);
    assert_close(&parts[1], &[2, 2], &[2.0, 3.0, 5.0, 6.0]);
    assert!(
        eval_op(
            &Op::Split {
                axis: 1,
                ratios: vec![1, 1]
            },
            &[&x]
        )
        .is_err()
    );
    let c = ev(Op::Concat { axis: 1 }, &[&parts[1], &parts[0]]);
    assert_close(&c, &[2, 3], &[2.0, 3.0, 1.0, 5.0, 6.0, 4.0]);
    let st = ev(Op::Stack { axis: 1 }, &[&parts[0], &parts[0]]);
    assert_close(&st, &[2, 2, 1], &[1.0, 1.0, 4.0, 4.0]);
    let un = eval_op(&Op::Unstack { axis: 1 }, &[&x]).unwrap();
    assert_eq!(un.len(), 3);
    assert_close(&un[2], &[2], &[3.0, 6.0]);
    assert_close(
        &ev(
            Op::Tile {
                repeats: vec![1, 2],
            },
            &[&parts[0]],
        ),
        &[2, 2],
        &[1.0, 1.0, 4.0, 4.0],
    );
    let g = ev(Op::Gather { axis: 1 }, &[&x, &i(&[2, 2], &[2, 0, 1, 1])]);
    assert_close(&g, &[2, 2, 2], &[3.0, 1.0, 2.0, 2.0, 6.0, 4.0, 5.0, 5.0]);
    assert!(eval_op(&Op::Gather { axis: 1 }, &[&x, &i(&[1], &[3])]).is_err());
    assert!(eval_op(&Op::Gather { axis: 0 }, &[&x, &i(&[1], &[-1])]).is_err());
    // Data movement works on any dtype.
    let bi = b(&[2, 2], &[true, false, false, false]);
    assert_eq!(
        ev(Op::Transpose { axes: vec![1, 0] }, &[&bi]),
        b(&[2, 2], &[true, false, false, false])
    );
    assert_eq!(
        ev(Op::Concat { axis: 0 }, &[&i(&[1], &[1]), &i(&[2], &[2, 3])]),
        i(&[3], &[1, 2, 3])
    );
    assert!(eval_op(&Op::Concat { axis: 0 }, &[&i(&[1], &[1]), &f(&[1], &[2.0])]).is_err());
}

// ---------------------------------------------------------------- errors and graphs

#[test]
fn malformed_operands_are_errors() {
    let x = f(&[1, 2, 4, 4], &[0.0; 32]);
    let w = f(&[1, 3, 3, 3], &[0.0; 27]);
    assert!(matches!(
        err(
            Op::Conv(conv_attrs(Border::Constant, &[], &[], &[], 1)),
            &[&x, &w, &scalar(0.0)]
        ),
        InterpError::Invalid { op: "conv", .. }
    ));
    // Wrong arity.
    assert!(matches!(
        err(Op::Binary(BinaryOp::Add), &[&x]),
        InterpError::Invalid { op: "add", .. }
    ));
    // Data that does not fill its shape.
    let broken = Tensor {
        shape: vec![3],
        data: crate::ir::tensor::TensorData::F32(vec![1.0]),
    };
    assert!(eval_op(&Op::Unary(UnaryOp::Neg), &[&broken]).is_err());
    // Window bigger than the padded input.
    let small = f(&[1, 1, 2], &[1.0, 2.0]);
    assert!(
        eval_op(
            &Op::MaxPool(window(
                &[1, 1, 3],
                Border::Constant,
                &[(0, 0), (0, 0), (0, 0)],
                &[]
            )),
            &[&small]
        )
        .is_err()
    );
    // Attribute lists of the wrong length.
    assert!(
        eval_op(
            &Op::MaxPool(window(&[1, 3], Border::Constant, &[], &[])),
            &[&small]
        )
        .is_err()
    );
}

fn small_graph() -> Graph {
    let mut g = Graph::new("net");
    let x = g.add_input("x", TensorType::new(DType::F32, &[1, 1, 2, 2]));
    let w = g.add_const(f(&[1, 1, 1, 1], &[-2.0]), Some("w".into()), None);
    let bias = g.add_const(scalar(1.0), None, None);
    let c = g.add_node(
        Op::Conv(conv_attrs(Border::Constant, &[], &[], &[], 1)),
        vec![x, w, bias],
        vec![TensorType::new(DType::F32, &[1, 1, 2, 2])],
    );
    let r = g.add_node(
        Op::Unary(UnaryOp::Relu),
        vec![c[0]],
        vec![TensorType::new(DType::F32, &[1, 1, 2, 2])],
    );
    g.outputs = vec![r[0], c[0]];
    g
}

#[test]
fn run_graph() {
    let g = small_graph();
    let out = run(&g, &[f(&[1, 1, 2, 2], &[1.0, -1.0, 0.25, 2.0])]).unwrap();
    assert_close(&out[0], &[1, 1, 2, 2], &[0.0, 3.0, 0.5, 0.0]);
    assert_close(&out[1], &[1, 1, 2, 2], &[-1.0, 3.0, 0.5, -3.0]);
    assert!(matches!(
        run(&g, &[]),
        Err(InterpError::InputCount {
            expected: 1,
            got: 0
        })
    ));
    assert!(matches!(
        run(&g, &[f(&[1, 1, 4], &[0.0; 4])]),
        Err(InterpError::InputType { index: 0, .. })
    ));
    // A declared result type that disagrees with what the op computes is reported.
    let mut bad = small_graph();
    bad.values[bad.nodes[1].outputs[0].index()].ty = TensorType::new(DType::F32, &[1, 1, 4]);
    let e = run(&bad, &[f(&[1, 1, 2, 2], &[0.0; 4])]).unwrap_err();
    assert!(matches!(e, InterpError::ResultType { .. }), "{e}");
}

/// `run` on a graph given in the IR text form; the outputs printed one per line.
fn run_text(text: &str, inputs: &[Tensor]) -> String {
    let g = crate::ir::parse::parse(text).unwrap_or_else(|e| panic!("{e}"));
    if let Err(errors) = crate::ir::verify::verify(&g) {
        panic!("{}", crate::ir::verify::render_errors(&errors));
    }
    let outputs = run(&g, inputs).unwrap_or_else(|e| panic!("{e}"));
    outputs
        .iter()
        .map(|t| {
            let values: Vec<String> = match &t.data {
                crate::ir::tensor::TensorData::F32(v) => {
                    v.iter().map(|x| format!("{x:.4}")).collect()
                }
                crate::ir::tensor::TensorData::I32(v) => v.iter().map(|x| x.to_string()).collect(),
                crate::ir::tensor::TensorData::Bool(v) => v.iter().map(|x| x.to_string()).collect(),
            };
            format!("{} [{}]\n", t.ty(), values.join(", "))
        })
        .collect()
}

#[test]
fn graph_from_text() {
    use expect_test::expect;
    // Edge detector, 2x2 max pool, flatten, softmax, and a reversed slice of the pool.
    let text = r#"nnefir 1
graph g(%x: f32[1,1,4,4]) -> (%p, %s, %r, %i) {
  %w: f32[1,1,3,3] = const [0.0,0.0,0.0, 0.0,1.0,-1.0, 0.0,0.0,0.0]
  %b: f32[] = const [0.0]
  %c: f32[1,1,4,4] = conv(%x, %w, %b) border=replicate padding=[] stride=[1,1] dilation=[1,1] groups=1
  %p: f32[1,1,2,2] = max_pool(%c) size=[1,1,2,2] border=ignore padding=[] stride=[1,1,2,2] dilation=[]
  %f: f32[1,4] = reshape(%p) shape=[1,-1] axis_start=0 axis_count=-1
  %s: f32[1,4] = softmax(%f) axes=[1]
  %r: f32[1,4] = slice(%f) axes=[1] begin=[-1] end=[-5] stride=[-1]
  %i: i32[1,1] = argmax_reduce(%f) axes=[1]
}
"#;
    let x = f(
        &[1, 1, 4, 4],
        &[
            0.0, 1.0, 3.0, 6.0, 0.0, 2.0, 2.0, 2.0, 5.0, 4.0, 3.0, 2.0, 0.0, 0.0, 9.0, 9.0,
        ],
    );
    expect![[r#"
        f32[1,1,2,2] [0.0000, 0.0000, 1.0000, 1.0000]
        f32[1,4] [0.1345, 0.1345, 0.3655, 0.3655]
        f32[1,4] [1.0000, 1.0000, 0.0000, 0.0000]
        i32[1,1] [2]
    "#]]
    .assert_eq(&run_text(text, &[x]));
}

// ---------------------------------------------------------------- speed

/// ResNet-18 at 224×224 with random weights: the interpreter must stay usable as an
/// oracle for real models in the unoptimized dev profile. Ignored by default (several
/// seconds); run with `cargo test -p nnefc-compiler --lib resnet18_speed -- --ignored`.
#[test]
#[ignore]
fn resnet18_speed() {
    let start = std::time::Instant::now();
    let conv = |x: &Tensor, cout: usize, k: usize, stride: usize, seed: u64| {
        let w = random(&[cout, x.shape[1], k, k], seed);
        let attrs = conv_attrs(
            Border::Constant,
            &[(k / 2, k / 2), (k / 2, k / 2)],
            &[stride, stride],
            &[],
            1,
        );
        ev(Op::Conv(attrs), &[x, &w, &random(&[1, cout], seed + 1)])
    };
    let relu = |x: &Tensor| ev(Op::Unary(UnaryOp::Relu), &[x]);
    let mut x = random(&[1, 3, 224, 224], 1);
    x = relu(&conv(&x, 64, 7, 2, 2));
    x = ev(
        Op::MaxPool(window(
            &[1, 1, 3, 3],
            Border::Ignore,
            &[(0, 0), (0, 0), (1, 1), (1, 1)],
            &[1, 1, 2, 2],
        )),
        &[&x],
    );
    let mut seed = 10;
    for (cout, first_stride) in [(64, 1), (128, 2), (256, 2), (512, 2)] {
        for block in 0..2 {
            let stride = if block == 0 { first_stride } else { 1 };
            seed += 10;
            let y = relu(&conv(&x, cout, 3, stride, seed));
            let y = conv(&y, cout, 3, 1, seed + 2);
            let skip = if stride != 1 || x.shape[1] != cout {
                conv(&x, cout, 1, stride, seed + 4)
            } else {
                x.clone()
            };
            x = relu(&ev(Op::Binary(BinaryOp::Add), &[&y, &skip]));
        }
    }
    x = ev(
        Op::Reduce {
            op: ReduceOp::Mean,
            axes: vec![2, 3],
        },
        &[&x],
    );
    x = ev(
        Op::Reshape {
            shape: vec![1, 512],
            axis_start: 0,
            axis_count: -1,
        },
        &[&x],
    );
    let out = ev(
        Op::Linear,
        &[&x, &random(&[1000, 512], 99), &random(&[1, 1000], 98)],
    );
    assert_eq!(out.shape, [1, 1000]);
    let elapsed = start.elapsed();
    eprintln!("resnet18 224x224: {elapsed:?}");
    assert!(elapsed.as_secs() < 60, "took {elapsed:?}");
}
