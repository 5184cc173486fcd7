//! Data-driven tests of `ir::infer`: each line is `op(operand types) → result types` or
//! `→ error: message`, compared against blessed expectations (`UPDATE_EXPECT=1`).

use super::*;
use crate::ir::op::{BinaryOp, ResampleMethod, RoiPoolOp};
use expect_test::{Expect, expect};

/// `f32[1,?,3]` → TensorType (test-only mini parser).
fn t(s: &str) -> TensorType {
    let (dt, rest) = s.split_once('[').expect("type has [");
    let dtype = DType::from_mnemonic(dt).expect("dtype");
    let body = rest.trim_end_matches(']');
    let dims = if body.is_empty() {
        vec![]
    } else {
        body.split(',')
            .map(|x| {
                if x == "?" {
                    Dim::Unknown
                } else {
                    Dim::Known(x.parse().expect("extent"))
                }
            })
            .collect()
    };
    TensorType::with_dims(dtype, dims)
}

fn run(op: &Op, types: &[&str]) -> String {
    let tys: Vec<TensorType> = types.iter().map(|s| t(s)).collect();
    let refs: Vec<&TensorType> = tys.iter().collect();
    let res = match infer(op, &refs) {
        Ok(v) => v
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("error: {e}"),
    };
    format!("{}({}) → {res}\n", op.mnemonic(), types.join(", "))
}

fn check(cases: &[(Op, &[&str])], e: Expect) {
    let s: String = cases.iter().map(|(op, tys)| run(op, tys)).collect();
    e.assert_eq(&s);
}

fn conv(
    padding: &[(usize, usize)],
    stride: &[usize],
    dilation: &[usize],
    groups: usize,
) -> ConvAttrs {
    ConvAttrs {
        border: Border::Constant,
        padding: padding.to_vec(),
        stride: stride.to_vec(),
        dilation: dilation.to_vec(),
        groups,
        output_shape: vec![],
    }
}

fn win(size: &[usize], padding: &[(usize, usize)], stride: &[usize]) -> WindowAttrs {
    WindowAttrs {
        size: size.to_vec(),
        border: Border::Constant,
        padding: padding.to_vec(),
        stride: stride.to_vec(),
        dilation: vec![],
        output_shape: vec![],
    }
}

fn with_border(mut w: WindowAttrs, b: Border) -> WindowAttrs {
    w.border = b;
    w
}

#[test]
fn elementwise() {
    use BinaryOp::*;
    check(
        &[
            (Op::Unary(UnaryOp::Exp), &["f32[1,3]"]),
            (Op::Unary(UnaryOp::Relu), &["f32[?,3]"]),
            (Op::Unary(UnaryOp::Copy), &["bool[2]"]),
            (Op::Unary(UnaryOp::Abs), &["i32[2]"]),
            (Op::Unary(UnaryOp::Not), &["bool[]"]),
            (Op::Unary(UnaryOp::Exp), &["i32[2]"]),
            (Op::Unary(UnaryOp::Not), &["f32[2]"]),
            (Op::Unary(UnaryOp::Exp), &["f32[2]", "f32[2]"]),
            (Op::Binary(Add), &["f32[1,3,5]", "f32[1,3,5]"]),
            (Op::Binary(Add), &["f32[4,16,8,8]", "f32[1,16]"]),
            (Op::Binary(Mul), &["f32[2,3]", "f32[]"]),
            (Op::Binary(Sub), &["f32[1]", "f32[5,6]"]),
            (Op::Binary(Add), &["f32[1,?]", "f32[4,7]"]),
            (Op::Binary(Add), &["f32[?,3]", "f32[1,3]"]),
            (Op::Binary(Add), &["f32[?]", "f32[?]"]),
            (Op::Binary(Add), &["i32[2]", "i32[2]"]),
            (Op::Binary(Lt), &["f32[2,3]", "f32[2,1]"]),
            (Op::Binary(And), &["bool[2]", "bool[2]"]),
            (Op::Binary(Add), &["f32[1,3,5]", "f32[1,4]"]),
            (Op::Binary(Add), &["f32[2,3]", "i32[2,3]"]),
            (Op::Binary(And), &["f32[2]", "f32[2]"]),
            (Op::Binary(Add), &["bool[2]", "bool[2]"]),
            (Op::Binary(Add), &["f32[3]", "f32[1,3]"]),
            (Op::Select, &["bool[2,1]", "f32[1,3]", "f32[]"]),
            (Op::Select, &["f32[2]", "f32[2]", "f32[2]"]),
            (Op::Select, &["bool[2]", "f32[2]", "i32[2]"]),
            (Op::Select, &["bool[3]", "f32[2]", "f32[2]"]),
            (Op::Clamp, &["f32[2,3]", "f32[]", "f32[1,3]"]),
            (Op::Clamp, &["f32[2,3]", "i32[]", "f32[]"]),
        ],
        expect![[r#"
            exp(f32[1,3]) → f32[1,3]
            relu(f32[?,3]) → f32[?,3]
            copy(bool[2]) → bool[2]
            abs(i32[2]) → i32[2]
            not(bool[]) → bool[]
            exp(i32[2]) → error: exp operand must be f32, got i32[2]
            not(f32[2]) → error: not operand must be bool, got f32[2]
            exp(f32[2], f32[2]) → error: exp expects 1 operand, got 2
            add(f32[1,3,5], f32[1,3,5]) → f32[1,3,5]
            add(f32[4,16,8,8], f32[1,16]) → f32[4,16,8,8]
            mul(f32[2,3], f32[]) → f32[2,3]
            sub(f32[1], f32[5,6]) → f32[5,6]
            add(f32[1,?], f32[4,7]) → f32[4,7]
            add(f32[?,3], f32[1,3]) → f32[?,3]
            add(f32[?], f32[?]) → f32[?]
            add(i32[2], i32[2]) → i32[2]
            lt(f32[2,3], f32[2,1]) → bool[2,3]
            and(bool[2], bool[2]) → bool[2]
            add(f32[1,3,5], f32[1,4]) → error: cannot broadcast f32[1,3,5] with f32[1,4]: extent 3 vs 4 at axis 1
            add(f32[2,3], i32[2,3]) → error: add operands differ in dtype: f32[2,3] and i32[2,3]
            and(f32[2], f32[2]) → error: and left operand must be bool, got f32[2]
            add(bool[2], bool[2]) → error: add left operand must be f32 or i32, got bool[2]
            add(f32[3], f32[1,3]) → f32[3,3]
            select(bool[2,1], f32[1,3], f32[]) → f32[2,3]
            select(f32[2], f32[2], f32[2]) → error: select condition must be bool, got f32[2]
            select(bool[2], f32[2], i32[2]) → error: select branches differ in dtype: f32[2] and i32[2]
            select(bool[3], f32[2], f32[2]) → error: cannot broadcast bool[3] with f32[2]: extent 3 vs 2 at axis 0
            clamp(f32[2,3], f32[], f32[1,3]) → f32[2,3]
            clamp(f32[2,3], i32[], f32[]) → error: clamp lower bound i32[] differs in dtype from f32[2,3]
        "#]],
    );
}

#[test]
fn window_helpers() {
    // Spec §5.8 worked examples.
    assert_eq!(auto_padding(224, 7, 2, 1), (2, 3));
    assert_eq!(window_output_extent(112, 3, 2, 1, (0, 0)), Some(55));
    assert_eq!(transposed_auto_padding(56, 112, 4, 2, 1), (1, 1));
    // Stride 2 on odd sizes: o = ceil(7/2) = 4, total = 3·2 + 3 − 7 = 2.
    assert_eq!(auto_padding(7, 3, 2, 1), (1, 1));
    assert_eq!(auto_padding(8, 3, 2, 1), (0, 1));
    assert_eq!(auto_padding(5, 1, 2, 1), (0, 0));
    // Dilation widens the window: w = (3−1)·2 + 1 = 5.
    assert_eq!(auto_padding(10, 3, 1, 2), (2, 2));
    assert_eq!(window_output_extent(2, 3, 1, 1, (0, 0)), None);
    assert_eq!(window_output_extent(2, 3, 1, 1, (1, 0)), Some(1));
    assert_eq!(window_output_extent(4, 2, 0, 1, (0, 0)), None);
    // Padding larger than the window.
    assert_eq!(window_output_extent(3, 1, 1, 1, (2, 2)), Some(7));
    let a = conv(&[], &[2, 2], &[], 1);
    assert_eq!(
        resolved_conv_padding(&a, &[1, 3, 224, 224], &[64, 3, 7, 7]),
        vec![(2, 3), (2, 3)]
    );
    let a = conv(&[(1, 0), (0, 1)], &[], &[], 1);
    assert_eq!(
        resolved_conv_padding(&a, &[1, 3, 5, 5], &[4, 3, 3, 3]),
        vec![(1, 0), (0, 1)]
    );
    let a = conv(&[], &[2, 2], &[], 1);
    assert_eq!(
        resolved_deconv_padding(&a, &[1, 8, 56, 56], &[8, 4, 4, 4], &[1, 4, 112, 112]),
        vec![(1, 1), (1, 1)]
    );
    let w = win(&[1, 1, 3, 3], &[], &[1, 1, 2, 2]);
    assert_eq!(
        resolved_window_padding(&w, &[1, 2, 7, 8]),
        vec![(0, 0), (0, 0), (1, 1), (0, 1)]
    );
    let w = win(&[1, 1, 2, 2], &[], &[1, 1, 2, 2]);
    assert_eq!(
        resolved_transposed_window_padding(&w, &[1, 2, 4, 4], &[1, 2, 8, 8]),
        vec![(0, 0); 4]
    );
    assert_eq!(conv_groups(&conv(&[], &[], &[], 0), 32), 32);
    let mut d = conv(&[], &[], &[], 0);
    assert_eq!(deconv_groups(&d, 8), 8);
    d.output_shape = vec![1, 16, 4, 4];
    assert_eq!(deconv_groups(&d, 8), 16);
}

#[test]
fn broadcast_reshape_slice_helpers() {
    let k = |v: &[usize]| v.iter().map(|&n| Dim::Known(n)).collect::<Vec<_>>();
    assert_eq!(
        broadcast_dims(&k(&[2, 1]), &k(&[2, 3, 4])),
        Ok(k(&[2, 3, 4]))
    );
    assert_eq!(
        broadcast_dims(&k(&[2, 3]), &k(&[2, 4])).map_err(|e| e.message),
        Err("cannot broadcast [2,3] with [2,4]: extent 3 vs 4 at axis 1".to_string())
    );
    assert_eq!(
        broadcast_dims(&[Dim::Unknown], &k(&[1])),
        Ok(vec![Dim::Unknown])
    );
    assert_eq!(
        reshape_output_dims(&k(&[2, 3, 4]), &[-1], 1, 2),
        Ok(k(&[2, 12]))
    );
    assert_eq!(
        reshape_output_dims(&k(&[2, 3, 4]), &[0, -1], 0, -1),
        Ok(k(&[2, 12]))
    );
    assert_eq!(
        reshape_output_dims(&[Dim::Unknown, Dim::Known(4)], &[-1, 2], 0, -1),
        Ok(vec![Dim::Unknown, Dim::Known(2)])
    );
    let r = |start, stride, count| SliceRange {
        start,
        stride,
        count,
    };
    assert_eq!(
        slice_ranges(&[5, 6], &[1], &[1], &[-1], &[]),
        Ok(vec![r(0, 1, 5), r(1, 1, 4)])
    );
    assert_eq!(
        slice_ranges(&[10], &[0], &[-1], &[-11], &[-1]),
        Ok(vec![r(9, -1, 10)])
    );
    assert_eq!(
        slice_ranges(&[10], &[0], &[8], &[1], &[-3]),
        Ok(vec![r(8, -3, 3)])
    );
    assert_eq!(
        slice_ranges(&[10], &[0], &[1], &[100], &[4]),
        Ok(vec![r(1, 4, 3)])
    );
    assert_eq!(
        slice_ranges(&[10], &[0], &[0], &[0], &[]),
        Ok(vec![r(0, 1, 10)])
    );
    assert_eq!(
        slice_ranges(&[10], &[0], &[3], &[3], &[]),
        Ok(vec![r(3, 1, 0)])
    );
    assert!(slice_ranges(&[10], &[1], &[0], &[1], &[]).is_err());
}

#[test]
fn conv_rules() {
    let c = |a: ConvAttrs| Op::Conv(a);
    let mut reflect = conv(&[(1, 1), (1, 1)], &[], &[], 1);
    reflect.border = Border::Reflect;
    let mut reflect_far = conv(&[(3, 3), (3, 3)], &[], &[], 1);
    reflect_far.border = Border::Reflect;
    let mut even_far = reflect_far.clone();
    even_far.border = Border::ReflectEven;
    let mut replicate_far = reflect_far.clone();
    replicate_far.border = Border::Replicate;
    let mut with_out = conv(&[], &[], &[], 1);
    with_out.output_shape = vec![1, 4, 5, 5];
    check(
        &[
            (
                c(conv(&[(3, 3), (3, 3)], &[2, 2], &[1, 1], 1)),
                &["f32[1,3,224,224]", "f32[64,3,7,7]", "f32[1,64]"],
            ),
            (
                c(conv(&[], &[2, 2], &[], 1)),
                &["f32[1,3,224,224]", "f32[64,3,7,7]", "f32[]"],
            ),
            (
                c(conv(&[], &[2, 2], &[], 1)),
                &["f32[1,3,7,7]", "f32[4,3,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["f32[1,3,?,7]", "f32[4,3,3,3]", "f32[]"],
            ),
            (
                c(conv(&[(0, 0), (0, 0)], &[], &[], 1)),
                &["f32[?,3,?,7]", "f32[4,3,3,3]", "f32[1,4]"],
            ),
            (
                c(conv(&[(0, 0), (0, 0)], &[], &[2, 2], 1)),
                &["f32[1,3,9,9]", "f32[4,3,3,3]", "f32[1,1]"],
            ),
            (
                c(conv(&[], &[], &[], 0)),
                &["f32[1,32,8,8]", "f32[32,1,3,3]", "f32[1,32]"],
            ),
            (
                c(conv(&[], &[], &[], 0)),
                &["f32[1,8,8,8]", "f32[16,1,3,3]", "f32[1,16]"],
            ),
            (
                c(conv(&[], &[], &[], 32)),
                &["f32[1,32,8,8]", "f32[32,1,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 2)),
                &["f32[1,8,8,8]", "f32[6,4,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["f32[1,8,5]", "f32[2,8,1]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["f32[1,3,?,?]", "f32[4,?,3,3]", "f32[]"],
            ),
            (c(reflect), &["f32[1,3,4,4]", "f32[4,3,3,3]", "f32[]"]),
            // errors
            (
                c(conv(&[], &[], &[], 3)),
                &["f32[1,8,8,8]", "f32[6,2,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 2)),
                &["f32[1,8,8,8]", "f32[5,4,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["f32[1,8,8,8]", "f32[4,3,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 0)),
                &["f32[1,8,8,8]", "f32[8,2,3,3]", "f32[]"],
            ),
            (
                c(conv(&[(0, 0), (0, 0)], &[], &[], 1)),
                &["f32[1,3,2,2]", "f32[4,3,3,3]", "f32[]"],
            ),
            (
                c(conv(&[(0, 0)], &[], &[], 1)),
                &["f32[1,3,4,4]", "f32[4,3,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[2], &[], 1)),
                &["f32[1,3,4,4]", "f32[4,3,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[0, 1], &[], 1)),
                &["f32[1,3,4,4]", "f32[4,3,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[1, 0], 1)),
                &["f32[1,3,4,4]", "f32[4,3,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["f32[1,3,4,4]", "f32[4,3,3,3]", "f32[1,5]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["f32[1,3,4,4]", "f32[4,3,3,3]", "f32[4]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["f32[1,3,4,4]", "f32[4,3,3,3]", "i32[]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["f32[1,3]", "f32[4,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["f32[1,3,4,4]", "f32[4,3,3]", "f32[]"],
            ),
            (
                c(conv(&[], &[], &[], 1)),
                &["i32[1,3,4,4]", "f32[4,3,3,3]", "f32[]"],
            ),
            (c(conv(&[], &[], &[], 1)), &["f32[1,3,4,4]", "f32[4,3,3,3]"]),
            (c(reflect_far), &["f32[1,3,3,3]", "f32[4,3,3,3]", "f32[]"]),
            (c(even_far), &["f32[1,3,3,3]", "f32[4,3,3,3]", "f32[]"]),
            (c(replicate_far), &["f32[1,3,3,3]", "f32[4,3,3,3]", "f32[]"]),
            (c(with_out), &["f32[1,3,5,5]", "f32[4,3,1,1]", "f32[]"]),
        ],
        expect![[r#"
            conv(f32[1,3,224,224], f32[64,3,7,7], f32[1,64]) → f32[1,64,112,112]
            conv(f32[1,3,224,224], f32[64,3,7,7], f32[]) → f32[1,64,112,112]
            conv(f32[1,3,7,7], f32[4,3,3,3], f32[]) → f32[1,4,4,4]
            conv(f32[1,3,?,7], f32[4,3,3,3], f32[]) → f32[1,4,?,7]
            conv(f32[?,3,?,7], f32[4,3,3,3], f32[1,4]) → f32[?,4,?,5]
            conv(f32[1,3,9,9], f32[4,3,3,3], f32[1,1]) → f32[1,4,5,5]
            conv(f32[1,32,8,8], f32[32,1,3,3], f32[1,32]) → f32[1,32,8,8]
            conv(f32[1,8,8,8], f32[16,1,3,3], f32[1,16]) → f32[1,16,8,8]
            conv(f32[1,32,8,8], f32[32,1,3,3], f32[]) → f32[1,32,8,8]
            conv(f32[1,8,8,8], f32[6,4,3,3], f32[]) → f32[1,6,8,8]
            conv(f32[1,8,5], f32[2,8,1], f32[]) → f32[1,2,5]
            conv(f32[1,3,?,?], f32[4,?,3,3], f32[]) → f32[1,4,?,?]
            conv(f32[1,3,4,4], f32[4,3,3,3], f32[]) → f32[1,4,4,4]
            conv(f32[1,8,8,8], f32[6,2,3,3], f32[]) → error: groups = 3 does not divide input channels 8
            conv(f32[1,8,8,8], f32[5,4,3,3], f32[]) → error: groups = 2 does not divide output channels 5 (filter f32[5,4,3,3])
            conv(f32[1,8,8,8], f32[4,3,3,3], f32[]) → error: conv filter f32[4,3,3,3] expects 3 input channels, input f32[1,8,8,8] has 8
            conv(f32[1,8,8,8], f32[8,2,3,3], f32[]) → error: conv filter f32[8,2,3,3] expects 16 input channels (2 per group × 8 groups), input f32[1,8,8,8] has 8
            conv(f32[1,3,2,2], f32[4,3,3,3], f32[]) → error: conv window of extent 3 (size 3, dilation 1) does not fit input extent 2 with padding (0,0) at axis 2
            conv(f32[1,3,4,4], f32[4,3,3,3], f32[]) → error: conv padding has 1 item but the op needs 2
            conv(f32[1,3,4,4], f32[4,3,3,3], f32[]) → error: conv stride has 1 item but the op needs 2
            conv(f32[1,3,4,4], f32[4,3,3,3], f32[]) → error: conv stride [0,1] has 0 at index 0; items must be ≥ 1
            conv(f32[1,3,4,4], f32[4,3,3,3], f32[]) → error: conv dilation [1,0] has 0 at index 1; items must be ≥ 1
            conv(f32[1,3,4,4], f32[4,3,3,3], f32[1,5]) → error: conv bias must be a scalar or [1,4], got f32[1,5]
            conv(f32[1,3,4,4], f32[4,3,3,3], f32[4]) → error: conv bias must be a scalar or [1,4], got f32[4]
            conv(f32[1,3,4,4], f32[4,3,3,3], i32[]) → error: conv bias must be f32, got i32[]
            conv(f32[1,3], f32[4,3], f32[]) → error: conv input must have rank ≥ 3 ([N,C,spatial…]), got f32[1,3]
            conv(f32[1,3,4,4], f32[4,3,3], f32[]) → error: conv filter f32[4,3,3] must have the rank of the input f32[1,3,4,4]
            conv(i32[1,3,4,4], f32[4,3,3,3], f32[]) → error: conv input must be f32, got i32[1,3,4,4]
            conv(f32[1,3,4,4], f32[4,3,3,3]) → error: conv expects 3 operands, got 2
            conv(f32[1,3,3,3], f32[4,3,3,3], f32[]) → error: conv border 'reflect' needs padding within the extent 3 at axis 2 (reads coordinates -3 to 5)
            conv(f32[1,3,3,3], f32[4,3,3,3], f32[]) → f32[1,4,7,7]
            conv(f32[1,3,3,3], f32[4,3,3,3], f32[]) → f32[1,4,7,7]
            conv(f32[1,3,5,5], f32[4,3,1,1], f32[]) → error: conv does not take output_shape
        "#]],
    );
}

#[test]
fn deconv_rules() {
    let d = |a: ConvAttrs| Op::Deconv(a);
    let out_shape = |mut a: ConvAttrs, s: &[usize]| {
        a.output_shape = s.to_vec();
        a
    };
    let mut reflect = conv(&[], &[], &[], 1);
    reflect.border = Border::Reflect;
    check(
        &[
            (
                d(conv(&[], &[2, 2], &[], 1)),
                &["f32[1,8,56,56]", "f32[8,4,4,4]", "f32[1,4]"],
            ),
            (
                d(conv(&[(1, 1), (1, 1)], &[2, 2], &[], 1)),
                &["f32[1,8,56,56]", "f32[8,4,4,4]", "f32[]"],
            ),
            (
                d(conv(&[(0, 0), (0, 0)], &[1, 1], &[], 1)),
                &["f32[1,8,5,5]", "f32[8,4,3,3]", "f32[]"],
            ),
            (
                d(out_shape(conv(&[], &[2, 2], &[], 1), &[1, 4, 111, 112])),
                &["f32[1,8,56,56]", "f32[8,4,3,3]", "f32[]"],
            ),
            (
                d(out_shape(
                    conv(&[(0, 0), (0, 0)], &[2, 2], &[], 1),
                    &[1, 4, 9, 10],
                )),
                &["f32[1,8,4,4]", "f32[8,4,3,3]", "f32[]"],
            ),
            (
                d(conv(&[], &[], &[], 0)),
                &["f32[1,8,5,5]", "f32[8,1,3,3]", "f32[]"],
            ),
            (
                d(out_shape(conv(&[], &[], &[], 0), &[1, 8, 5, 5])),
                &["f32[1,16,5,5]", "f32[16,1,3,3]", "f32[]"],
            ),
            (
                d(out_shape(conv(&[], &[], &[], 0), &[1, 16, 5, 5])),
                &["f32[1,8,5,5]", "f32[8,2,3,3]", "f32[]"],
            ),
            (
                d(conv(&[], &[], &[], 2)),
                &["f32[1,8,5,5]", "f32[8,3,3,3]", "f32[1,6]"],
            ),
            (
                d(conv(&[], &[2, 2], &[], 1)),
                &["f32[?,8,?,5]", "f32[8,4,3,3]", "f32[]"],
            ),
            // errors
            (
                d(conv(&[], &[], &[], 3)),
                &["f32[1,8,5,5]", "f32[8,3,3,3]", "f32[]"],
            ),
            (
                d(conv(&[], &[], &[], 1)),
                &["f32[1,8,5,5]", "f32[6,3,3,3]", "f32[]"],
            ),
            (
                d(out_shape(conv(&[], &[2, 2], &[], 1), &[1, 4, 113, 112])),
                &["f32[1,8,56,56]", "f32[8,4,3,3]", "f32[]"],
            ),
            (
                d(out_shape(conv(&[], &[2, 2], &[], 1), &[1, 5, 112, 112])),
                &["f32[1,8,56,56]", "f32[8,4,3,3]", "f32[]"],
            ),
            (
                d(out_shape(conv(&[], &[2, 2], &[], 1), &[2, 4, 112, 112])),
                &["f32[1,8,56,56]", "f32[8,4,3,3]", "f32[]"],
            ),
            (
                d(out_shape(conv(&[], &[2, 2], &[], 1), &[1, 4, 112])),
                &["f32[1,8,56,56]", "f32[8,4,3,3]", "f32[]"],
            ),
            (
                d(conv(&[(3, 3), (0, 0)], &[], &[], 1)),
                &["f32[1,8,1,5]", "f32[8,4,3,3]", "f32[]"],
            ),
            (d(reflect), &["f32[1,8,5,5]", "f32[8,4,3,3]", "f32[]"]),
        ],
        expect![[r#"
            deconv(f32[1,8,56,56], f32[8,4,4,4], f32[1,4]) → f32[1,4,112,112]
            deconv(f32[1,8,56,56], f32[8,4,4,4], f32[]) → f32[1,4,112,112]
            deconv(f32[1,8,5,5], f32[8,4,3,3], f32[]) → f32[1,4,7,7]
            deconv(f32[1,8,56,56], f32[8,4,3,3], f32[]) → f32[1,4,111,112]
            deconv(f32[1,8,4,4], f32[8,4,3,3], f32[]) → f32[1,4,9,10]
            deconv(f32[1,8,5,5], f32[8,1,3,3], f32[]) → f32[1,8,5,5]
            deconv(f32[1,16,5,5], f32[16,1,3,3], f32[]) → f32[1,8,5,5]
            deconv(f32[1,8,5,5], f32[8,2,3,3], f32[]) → error: groups = 16 does not divide input channels 8
            deconv(f32[1,8,5,5], f32[8,3,3,3], f32[1,6]) → f32[1,6,5,5]
            deconv(f32[?,8,?,5], f32[8,4,3,3], f32[]) → f32[?,4,?,10]
            deconv(f32[1,8,5,5], f32[8,3,3,3], f32[]) → error: groups = 3 does not divide input channels 8
            deconv(f32[1,8,5,5], f32[6,3,3,3], f32[]) → error: deconv filter f32[6,3,3,3] expects 6 input channels, input f32[1,8,5,5] has 8
            deconv(f32[1,8,56,56], f32[8,4,3,3], f32[]) → error: deconv output_shape extent 113 at axis 2 does not map back to input extent 56 (size 3, stride 2, dilation 1)
            deconv(f32[1,8,56,56], f32[8,4,3,3], f32[]) → error: deconv output_shape [1,5,112,112] has 5 channels but filter f32[8,4,3,3] with groups 1 gives 4
            deconv(f32[1,8,56,56], f32[8,4,3,3], f32[]) → error: deconv output_shape [2,4,112,112] has batch 2 but input f32[1,8,56,56] has 1
            deconv(f32[1,8,56,56], f32[8,4,3,3], f32[]) → error: deconv output_shape has 3 items but the op needs 4
            deconv(f32[1,8,1,5], f32[8,4,3,3], f32[]) → error: deconv padding (3,3) at axis 2 leaves no output (input extent 1, size 3, stride 1, dilation 1)
            deconv(f32[1,8,5,5], f32[8,4,3,3], f32[]) → error: deconv does not support border 'reflect' (only 'constant' and 'ignore')
        "#]],
    );
}

#[test]
fn window_rules() {
    let bx = |w: WindowAttrs| Op::Box {
        window: w,
        normalize: true,
    };
    let dbx = |w: WindowAttrs| Op::Debox {
        window: w,
        normalize: false,
    };
    let out_shape = |mut w: WindowAttrs, s: &[usize]| {
        w.output_shape = s.to_vec();
        w
    };
    let pool = win(
        &[1, 1, 3, 3],
        &[(0, 0), (0, 0), (0, 0), (0, 0)],
        &[1, 1, 2, 2],
    );
    let auto = win(&[1, 1, 3, 3], &[], &[1, 1, 2, 2]);
    check(
        &[
            (Op::MaxPool(pool.clone()), &["f32[1,64,112,112]"]),
            (Op::MaxPool(auto.clone()), &["f32[1,64,7,8]"]),
            (
                Op::MaxPool(with_border(auto.clone(), Border::Ignore)),
                &["f32[1,64,?,8]"],
            ),
            (bx(win(&[2, 2], &[], &[])), &["f32[3,3]"]),
            (bx(win(&[1], &[(2, 2)], &[])), &["f32[3]"]),
            (
                bx(with_border(
                    win(&[1, 1, 3], &[(0, 0), (0, 0), (2, 2)], &[]),
                    Border::Reflect,
                )),
                &["f32[1,1,3]"],
            ),
            (
                bx(with_border(
                    win(&[1, 1, 3], &[(0, 0), (0, 0), (3, 3)], &[]),
                    Border::ReflectEven,
                )),
                &["f32[1,1,3]"],
            ),
            (
                bx(with_border(
                    win(&[1, 1, 3], &[(0, 0), (0, 0), (5, 5)], &[]),
                    Border::Replicate,
                )),
                &["f32[1,1,3]"],
            ),
            (bx(win(&[], &[], &[])), &["f32[]"]),
            (Op::ArgmaxPool(auto.clone()), &["f32[1,64,7,8]"]),
            (
                Op::Sample(auto.clone()),
                &["f32[1,64,7,8]", "i32[1,64,4,4]"],
            ),
            (Op::Sample(auto.clone()), &["f32[1,64,7,8]", "i32[?,?,?,?]"]),
            (
                dbx(win(&[1, 1, 2, 2], &[], &[1, 1, 2, 2])),
                &["f32[1,3,4,5]"],
            ),
            (
                dbx(win(
                    &[1, 1, 3, 3],
                    &[(0, 0), (0, 0), (1, 1), (0, 0)],
                    &[1, 1, 2, 2],
                )),
                &["f32[1,3,4,5]"],
            ),
            (
                dbx(out_shape(
                    win(&[1, 1, 3, 3], &[], &[1, 1, 2, 2]),
                    &[1, 3, 7, 10],
                )),
                &["f32[1,3,4,5]"],
            ),
            (
                Op::Desample(auto.clone()),
                &["f32[1,64,4,4]", "i32[1,64,4,4]"],
            ),
            (
                Op::Desample(out_shape(auto.clone(), &[1, 64, 7, 8])),
                &["f32[1,64,4,4]", "i32[1,64,4,4]"],
            ),
            // errors
            (Op::MaxPool(win(&[1, 1, 3], &[], &[])), &["f32[1,64,7,8]"]),
            (
                Op::MaxPool(win(&[1, 1, 0, 3], &[], &[])),
                &["f32[1,64,7,8]"],
            ),
            (
                Op::MaxPool(win(&[1, 1, 3, 3], &[(0, 0)], &[])),
                &["f32[1,64,7,8]"],
            ),
            (
                Op::MaxPool(win(&[1, 1, 3, 3], &[], &[1, 1, 2])),
                &["f32[1,64,7,8]"],
            ),
            (Op::MaxPool(pool.clone()), &["f32[1,64,2,2]"]),
            (Op::MaxPool(pool.clone()), &["i32[1,64,8,8]"]),
            (
                Op::MaxPool(out_shape(pool.clone(), &[1, 64, 8, 8])),
                &["f32[1,64,8,8]"],
            ),
            (
                bx(with_border(
                    win(&[1, 1, 3], &[(0, 0), (0, 0), (3, 3)], &[]),
                    Border::Reflect,
                )),
                &["f32[1,1,3]"],
            ),
            (
                bx(with_border(
                    win(&[1, 1, 3], &[(0, 0), (0, 0), (0, 4)], &[]),
                    Border::ReflectEven,
                )),
                &["f32[1,1,3]"],
            ),
            (
                Op::Sample(auto.clone()),
                &["f32[1,64,7,8]", "i32[1,64,4,5]"],
            ),
            (
                Op::Sample(auto.clone()),
                &["f32[1,64,7,8]", "f32[1,64,4,4]"],
            ),
            (
                Op::Desample(auto.clone()),
                &["f32[1,64,4,4]", "i32[1,64,4,3]"],
            ),
            (
                dbx(out_shape(
                    win(&[1, 1, 3, 3], &[], &[1, 1, 2, 2]),
                    &[1, 3, 9, 10],
                )),
                &["f32[1,3,4,5]"],
            ),
            (
                dbx(with_border(
                    win(&[1, 1, 2, 2], &[], &[1, 1, 2, 2]),
                    Border::Replicate,
                )),
                &["f32[1,3,4,5]"],
            ),
        ],
        expect![[r#"
            max_pool(f32[1,64,112,112]) → f32[1,64,55,55]
            max_pool(f32[1,64,7,8]) → f32[1,64,4,4]
            max_pool(f32[1,64,?,8]) → f32[1,64,?,4]
            box(f32[3,3]) → f32[3,3]
            box(f32[3]) → f32[7]
            box(f32[1,1,3]) → f32[1,1,5]
            box(f32[1,1,3]) → f32[1,1,7]
            box(f32[1,1,3]) → f32[1,1,11]
            box(f32[]) → f32[]
            argmax_pool(f32[1,64,7,8]) → i32[1,64,4,4]
            sample(f32[1,64,7,8], i32[1,64,4,4]) → f32[1,64,4,4]
            sample(f32[1,64,7,8], i32[?,?,?,?]) → f32[1,64,4,4]
            debox(f32[1,3,4,5]) → f32[1,3,8,10]
            debox(f32[1,3,4,5]) → f32[1,3,7,11]
            debox(f32[1,3,4,5]) → f32[1,3,7,10]
            desample(f32[1,64,4,4], i32[1,64,4,4]) → f32[1,64,8,8]
            desample(f32[1,64,4,4], i32[1,64,4,4]) → f32[1,64,7,8]
            max_pool(f32[1,64,7,8]) → error: max_pool size has 3 items but the op needs 4
            max_pool(f32[1,64,7,8]) → error: max_pool size [1,1,0,3] has 0 at index 2; items must be ≥ 1
            max_pool(f32[1,64,7,8]) → error: max_pool padding has 1 item but the op needs 4
            max_pool(f32[1,64,7,8]) → error: max_pool stride has 3 items but the op needs 4
            max_pool(f32[1,64,2,2]) → error: max_pool window of extent 3 (size 3, dilation 1) does not fit input extent 2 with padding (0,0) at axis 2
            max_pool(i32[1,64,8,8]) → error: max_pool input must be f32, got i32[1,64,8,8]
            max_pool(f32[1,64,8,8]) → error: max_pool does not take output_shape
            box(f32[1,1,3]) → error: box border 'reflect' needs padding within the extent 3 at axis 2 (reads coordinates -3 to 5)
            box(f32[1,1,3]) → error: box border 'reflect-even' needs padding within the extent 3 at axis 2 (reads coordinates 0 to 6)
            sample(f32[1,64,7,8], i32[1,64,4,5]) → error: sample index must have the output shape: [1,64,4,5] and [1,64,4,4] differ at axis 3 (5 vs 4)
            sample(f32[1,64,7,8], f32[1,64,4,4]) → error: sample index must be i32, got f32[1,64,4,4]
            desample(f32[1,64,4,4], i32[1,64,4,3]) → error: desample index must have the input shape: [1,64,4,3] and [1,64,4,4] differ at axis 3 (3 vs 4)
            debox(f32[1,3,4,5]) → error: debox output_shape extent 9 at axis 2 does not map back to input extent 4 (size 3, stride 2, dilation 1)
            debox(f32[1,3,4,5]) → error: debox does not support border 'replicate' (only 'constant' and 'ignore')
        "#]],
    );
}

#[test]
fn reductions_and_contractions() {
    let red = |op: ReduceOp, axes: &[usize]| Op::Reduce {
        op,
        axes: axes.to_vec(),
    };
    let mm = |a: bool, b: bool| Op::MatMul {
        transpose_a: a,
        transpose_b: b,
    };
    check(
        &[
            (red(ReduceOp::Sum, &[1]), &["f32[2,3,4]"]),
            (red(ReduceOp::Mean, &[2, 3]), &["f32[1,64,7,7]"]),
            (red(ReduceOp::Max, &[]), &["f32[2,3]"]),
            (red(ReduceOp::ArgMax, &[1]), &["f32[2,?]"]),
            (red(ReduceOp::Any, &[0]), &["bool[2,3]"]),
            (red(ReduceOp::All, &[0, 1]), &["bool[2,3]"]),
            (red(ReduceOp::Sum, &[3]), &["f32[2,3]"]),
            (red(ReduceOp::Sum, &[1, 0]), &["f32[2,3]"]),
            (red(ReduceOp::Sum, &[1, 1]), &["f32[2,3]"]),
            (red(ReduceOp::Any, &[0]), &["f32[2,3]"]),
            (red(ReduceOp::ArgMin, &[0]), &["bool[2,3]"]),
            (Op::Softmax { axes: vec![1] }, &["f32[1,1000]"]),
            (Op::Softmax { axes: vec![2, 1] }, &["f32[1,3,4]"]),
            (Op::Softmax { axes: vec![2] }, &["f32[1,1000]"]),
            (mm(false, false), &["f32[2,3]", "f32[3,4]"]),
            (mm(true, false), &["f32[3,2]", "f32[3,4]"]),
            (mm(false, true), &["f32[2,3]", "f32[4,3]"]),
            (mm(true, true), &["f32[3,2]", "f32[4,3]"]),
            (mm(false, false), &["f32[5,1,2,3]", "f32[1,7,3,4]"]),
            (mm(false, false), &["f32[?,2,3]", "f32[1,3,?]"]),
            (mm(false, false), &["f32[2,3]", "f32[4,5]"]),
            (mm(false, true), &["f32[2,3]", "f32[3,4]"]),
            (mm(false, false), &["f32[2,2,3]", "f32[3,3,4]"]),
            (mm(false, false), &["f32[2,3]", "f32[1,3,4]"]),
            (mm(false, false), &["f32[3]", "f32[3]"]),
            (Op::Linear, &["f32[1,512]", "f32[1000,512]", "f32[1,1000]"]),
            (Op::Linear, &["f32[?,512]", "f32[10,512]", "f32[]"]),
            (Op::Linear, &["f32[1,512]", "f32[1000,256]", "f32[]"]),
            (Op::Linear, &["f32[1,2,512]", "f32[1000,512]", "f32[]"]),
            (Op::Linear, &["f32[1,512]", "f32[1000,512]", "f32[2,1000]"]),
            (
                Op::BatchNorm { epsilon: 1e-5 },
                &[
                    "f32[1,16,8,8]",
                    "f32[1,16]",
                    "f32[1,16]",
                    "f32[]",
                    "f32[1,16,1,1]",
                ],
            ),
            (
                Op::BatchNorm { epsilon: 1e-5 },
                &["f32[1,16,8,8]", "f32[1,8]", "f32[1,16]", "f32[]", "f32[]"],
            ),
            (
                Op::BatchNorm { epsilon: 1e-5 },
                &["f32[1,16]", "f32[1,16,1]", "f32[1,16]", "f32[]", "f32[]"],
            ),
            (Op::BatchNorm { epsilon: 1e-5 }, &["f32[1,16]", "f32[1,16]"]),
        ],
        expect![[r#"
            sum_reduce(f32[2,3,4]) → f32[2,1,4]
            mean_reduce(f32[1,64,7,7]) → f32[1,64,1,1]
            max_reduce(f32[2,3]) → f32[2,3]
            argmax_reduce(f32[2,?]) → i32[2,1]
            any_reduce(bool[2,3]) → bool[1,3]
            all_reduce(bool[2,3]) → bool[1,1]
            sum_reduce(f32[2,3]) → error: sum_reduce axis 3 is out of range for rank 2
            sum_reduce(f32[2,3]) → error: sum_reduce axes [1,0] must be sorted
            sum_reduce(f32[2,3]) → error: sum_reduce axes [1,1] repeat axis 1
            any_reduce(f32[2,3]) → error: any_reduce input must be bool, got f32[2,3]
            argmin_reduce(bool[2,3]) → error: argmin_reduce input must be f32, got bool[2,3]
            softmax(f32[1,1000]) → f32[1,1000]
            softmax(f32[1,3,4]) → f32[1,3,4]
            softmax(f32[1,1000]) → error: softmax axis 2 is out of range for rank 2
            matmul(f32[2,3], f32[3,4]) → f32[2,4]
            matmul(f32[3,2], f32[3,4]) → f32[2,4]
            matmul(f32[2,3], f32[4,3]) → f32[2,4]
            matmul(f32[3,2], f32[4,3]) → f32[2,4]
            matmul(f32[5,1,2,3], f32[1,7,3,4]) → f32[5,7,2,4]
            matmul(f32[?,2,3], f32[1,3,?]) → f32[?,2,?]
            matmul(f32[2,3], f32[4,5]) → error: matmul inner extents differ: 3 vs 4 (A f32[2,3], B f32[4,5])
            matmul(f32[2,3], f32[3,4]) → error: matmul inner extents differ: 3 vs 4 (A f32[2,3], B f32[3,4] transposed)
            matmul(f32[2,2,3], f32[3,3,4]) → error: matmul batch dims of A f32[2,2,3] and B f32[3,3,4] do not broadcast: cannot broadcast [2] with [3]: extent 2 vs 3 at axis 0
            matmul(f32[2,3], f32[1,3,4]) → error: matmul operands differ in rank: A f32[2,3], B f32[1,3,4]
            matmul(f32[3], f32[3]) → error: matmul A must have rank ≥ 2, got f32[3]
            linear(f32[1,512], f32[1000,512], f32[1,1000]) → f32[1,1000]
            linear(f32[?,512], f32[10,512], f32[]) → f32[?,10]
            linear(f32[1,512], f32[1000,256], f32[]) → error: linear input f32[1,512] has 512 channels but filter f32[1000,256] expects 256
            linear(f32[1,2,512], f32[1000,512], f32[]) → error: linear input must have rank 2 ([N,Cin]), got f32[1,2,512]
            linear(f32[1,512], f32[1000,512], f32[2,1000]) → error: linear bias must be a scalar or [1,1000], got f32[2,1000]
            batch_normalization(f32[1,16,8,8], f32[1,16], f32[1,16], f32[], f32[1,16,1,1]) → f32[1,16,8,8]
            batch_normalization(f32[1,16,8,8], f32[1,8], f32[1,16], f32[], f32[]) → error: batch_normalization mean f32[1,8] does not broadcast to the input f32[1,16,8,8]: extent 8 vs 16 at axis 1
            batch_normalization(f32[1,16], f32[1,16,1], f32[1,16], f32[], f32[]) → error: batch_normalization mean f32[1,16,1] has higher rank than the input f32[1,16]
            batch_normalization(f32[1,16], f32[1,16]) → error: batch_normalization expects 5 operands, got 2
        "#]],
    );
}

#[test]
fn shape_ops() {
    let reshape = |shape: &[i64], axis_start: usize, axis_count: i64| Op::Reshape {
        shape: shape.to_vec(),
        axis_start,
        axis_count,
    };
    let slice = |axes: &[usize], begin: &[i64], end: &[i64], stride: &[i64]| Op::Slice {
        axes: axes.to_vec(),
        begin: begin.to_vec(),
        end: end.to_vec(),
        stride: stride.to_vec(),
    };
    check(
        &[
            (reshape(&[1, -1], 0, -1), &["f32[1,512,1,1]"]),
            (reshape(&[0, -1], 0, -1), &["f32[?,512,7,7]"]),
            (reshape(&[-1], 1, 2), &["i32[2,3,4,5]"]),
            (reshape(&[2, 2], 1, 1), &["f32[3,4,5]"]),
            (reshape(&[1], 3, 0), &["f32[3,4,5]"]),
            (reshape(&[-1, 2], 0, -1), &["f32[?,4]"]),
            (reshape(&[6], 0, -1), &["f32[2,?]"]),
            (reshape(&[5, -1], 0, -1), &["f32[2,3]"]),
            (reshape(&[-1, -1], 0, -1), &["f32[2,3]"]),
            (reshape(&[7], 0, -1), &["f32[2,3]"]),
            (reshape(&[0, 0, 0], 0, -1), &["f32[2,3]"]),
            (reshape(&[-2], 0, -1), &["f32[6]"]),
            (reshape(&[6], 3, -1), &["f32[6]"]),
            (reshape(&[6], 0, 2), &["f32[6]"]),
            (Op::Squeeze { axes: vec![2, 3] }, &["f32[1,512,1,1]"]),
            (Op::Squeeze { axes: vec![] }, &["f32[1,512]"]),
            (Op::Squeeze { axes: vec![0] }, &["f32[?,512]"]),
            (Op::Squeeze { axes: vec![1] }, &["f32[1,512]"]),
            (Op::Squeeze { axes: vec![3, 2] }, &["f32[1,512,1,1]"]),
            (Op::Unsqueeze { axes: vec![0, 3] }, &["f32[2,3]"]),
            (Op::Unsqueeze { axes: vec![4] }, &["f32[2,3]"]),
            (
                Op::Transpose {
                    axes: vec![0, 2, 3, 1],
                },
                &["f32[1,3,4,5]"],
            ),
            (Op::Transpose { axes: vec![1, 0] }, &["f32[1,3,4,5]"]),
            (Op::Transpose { axes: vec![] }, &["f32[1,3]"]),
            (Op::Transpose { axes: vec![0, 2] }, &["f32[1,3,4]"]),
            (
                Op::Transpose {
                    axes: vec![0, 1, 2],
                },
                &["f32[1,3]"],
            ),
            (
                Op::Split {
                    axis: 1,
                    ratios: vec![1, 2, 1],
                },
                &["f32[2,8]"],
            ),
            (
                Op::Split {
                    axis: 1,
                    ratios: vec![1, 1],
                },
                &["f32[2,?]"],
            ),
            (
                Op::Split {
                    axis: 1,
                    ratios: vec![1, 2],
                },
                &["f32[2,8]"],
            ),
            (
                Op::Split {
                    axis: 2,
                    ratios: vec![1],
                },
                &["f32[2,8]"],
            ),
            (
                Op::Split {
                    axis: 0,
                    ratios: vec![],
                },
                &["f32[2,8]"],
            ),
            (
                Op::Concat { axis: 1 },
                &["f32[1,3,4]", "f32[1,5,4]", "f32[?,1,4]"],
            ),
            (Op::Concat { axis: 1 }, &["f32[1,?,4]", "f32[1,5,4]"]),
            (Op::Concat { axis: 0 }, &["f32[2]"]),
            (Op::Concat { axis: 1 }, &["f32[1,3,4]", "f32[1,5,5]"]),
            (Op::Concat { axis: 1 }, &["f32[1,3,4]", "i32[1,5,4]"]),
            (Op::Concat { axis: 3 }, &["f32[1,3,4]", "f32[1,5,4]"]),
            (Op::Concat { axis: 0 }, &[]),
            (Op::Stack { axis: 1 }, &["f32[2,3]", "f32[2,?]", "f32[?,3]"]),
            (Op::Stack { axis: 2 }, &["f32[2,3]"]),
            (Op::Stack { axis: 3 }, &["f32[2,3]"]),
            (Op::Stack { axis: 0 }, &["f32[2,3]", "f32[2,4]"]),
            (Op::Unstack { axis: 1 }, &["f32[2,3]"]),
            (Op::Unstack { axis: 0 }, &["f32[?,3]"]),
            (slice(&[1], &[1], &[-1], &[]), &["f32[2,5]"]),
            (slice(&[0, 1], &[0, 0], &[0, 0], &[]), &["f32[2,5]"]),
            (slice(&[1], &[-1], &[-6], &[-1]), &["f32[2,5]"]),
            (slice(&[1], &[0], &[100], &[2]), &["f32[2,5]"]),
            (slice(&[1], &[2], &[2], &[]), &["f32[2,5]"]),
            (slice(&[1], &[1], &[3], &[]), &["f32[2,?]"]),
            (slice(&[1], &[3], &[1], &[]), &["f32[2,5]"]),
            (slice(&[1], &[1], &[3], &[-1]), &["f32[2,5]"]),
            (slice(&[1], &[1], &[3], &[0]), &["f32[2,5]"]),
            (slice(&[2], &[1], &[3], &[]), &["f32[2,5]"]),
            (slice(&[1], &[1, 2], &[3], &[]), &["f32[2,5]"]),
            (slice(&[1], &[1], &[3], &[1, 1]), &["f32[2,5]"]),
            (slice(&[1, 1], &[1, 1], &[3, 3], &[]), &["f32[2,5]"]),
            (
                Op::Tile {
                    repeats: vec![2, 1, 3],
                },
                &["f32[1,?,2]"],
            ),
            (Op::Tile { repeats: vec![2] }, &["f32[1,2]"]),
            (
                Op::Tile {
                    repeats: vec![0, 1],
                },
                &["f32[1,2]"],
            ),
            (
                Op::Pad {
                    padding: vec![(0, 0), (1, 2)],
                    border: Border::Constant,
                    value: 0.0,
                },
                &["f32[2,3]"],
            ),
            (
                Op::Pad {
                    padding: vec![(0, 0), (2, 2)],
                    border: Border::Reflect,
                    value: 0.0,
                },
                &["f32[2,3]"],
            ),
            (
                Op::Pad {
                    padding: vec![(0, 0), (3, 3)],
                    border: Border::ReflectEven,
                    value: 0.0,
                },
                &["f32[2,?]"],
            ),
            (
                Op::Pad {
                    padding: vec![(0, 0), (3, 0)],
                    border: Border::Reflect,
                    value: 0.0,
                },
                &["f32[2,3]"],
            ),
            (
                Op::Pad {
                    padding: vec![(0, 0), (0, 4)],
                    border: Border::ReflectEven,
                    value: 0.0,
                },
                &["f32[2,3]"],
            ),
            (
                Op::Pad {
                    padding: vec![(1, 1)],
                    border: Border::Constant,
                    value: 0.0,
                },
                &["f32[2,3]"],
            ),
            (
                Op::Pad {
                    padding: vec![(1, 1), (1, 1)],
                    border: Border::Ignore,
                    value: 0.0,
                },
                &["f32[2,3]"],
            ),
            (
                Op::Pad {
                    padding: vec![(1, 1)],
                    border: Border::Constant,
                    value: 0.0,
                },
                &["i32[2]"],
            ),
            (Op::Gather { axis: 1 }, &["f32[2,10,3]", "i32[4,5]"]),
            (Op::Gather { axis: 0 }, &["bool[10]", "i32[]"]),
            (Op::Gather { axis: 0 }, &["f32[10]", "f32[2]"]),
            (Op::Gather { axis: 1 }, &["f32[10]", "i32[2]"]),
            (Op::Cast { to: DType::I32 }, &["f32[2,?]"]),
            (Op::Cast { to: DType::Bool }, &["i32[]"]),
        ],
        expect![[r#"
            reshape(f32[1,512,1,1]) → f32[1,512]
            reshape(f32[?,512,7,7]) → f32[?,?]
            reshape(i32[2,3,4,5]) → i32[2,12,5]
            reshape(f32[3,4,5]) → f32[3,2,2,5]
            reshape(f32[3,4,5]) → f32[3,4,5,1]
            reshape(f32[?,4]) → f32[?,2]
            reshape(f32[2,?]) → f32[6]
            reshape(f32[2,3]) → error: cannot reshape [2,3] to [5,-1]: volume 6 is not a multiple of 5
            reshape(f32[2,3]) → error: reshape shape [-1,-1] has more than one -1
            reshape(f32[2,3]) → error: cannot reshape [2,3] (volume 6) to [7] (volume 7)
            reshape(f32[2,3]) → error: reshape shape item 2 is 0 (copy) but input axis 2 does not exist
            reshape(f32[6]) → error: reshape shape item 0 is -2; items must be ≥ -1
            reshape(f32[6]) → error: reshape axis_start 3 is out of range for rank 1
            reshape(f32[6]) → error: reshape axes [0, 2) exceed rank 1
            squeeze(f32[1,512,1,1]) → f32[1,512]
            squeeze(f32[1,512]) → f32[1,512]
            squeeze(f32[?,512]) → f32[512]
            squeeze(f32[1,512]) → error: squeeze axis 1 of f32[1,512] has extent 512, not 1
            squeeze(f32[1,512,1,1]) → error: squeeze axes [3,2] must be sorted
            unsqueeze(f32[2,3]) → f32[1,2,3,1]
            unsqueeze(f32[2,3]) → error: unsqueeze axis 4 is out of range for rank 3
            transpose(f32[1,3,4,5]) → f32[1,4,5,3]
            transpose(f32[1,3,4,5]) → f32[3,1,4,5]
            transpose(f32[1,3]) → f32[1,3]
            transpose(f32[1,3,4]) → error: transpose axes [0,2] are not a permutation of 0..2
            transpose(f32[1,3]) → error: transpose axes [0,1,2] are longer than the rank of f32[1,3]
            split(f32[2,8]) → f32[2,2], f32[2,4], f32[2,2]
            split(f32[2,?]) → f32[2,?], f32[2,?]
            split(f32[2,8]) → error: split of extent 8 at axis 1 by ratios [1,2] (sum 3) is not exact
            split(f32[2,8]) → error: split axis 2 is out of range for f32[2,8]
            split(f32[2,8]) → error: split ratios must not be empty
            concat(f32[1,3,4], f32[1,5,4], f32[?,1,4]) → f32[1,9,4]
            concat(f32[1,?,4], f32[1,5,4]) → f32[1,?,4]
            concat(f32[2]) → f32[2]
            concat(f32[1,3,4], f32[1,5,5]) → error: concat operand 1 f32[1,5,5] differs from operand 0 f32[1,3,4] at axis 2
            concat(f32[1,3,4], i32[1,5,4]) → error: concat operand 1 i32[1,5,4] does not match operand 0 f32[1,3,4]
            concat(f32[1,3,4], f32[1,5,4]) → error: concat axis 3 is out of range for f32[1,3,4]
            concat() → error: concat needs at least one operand
            stack(f32[2,3], f32[2,?], f32[?,3]) → f32[2,3,3]
            stack(f32[2,3]) → f32[2,3,1]
            stack(f32[2,3]) → error: stack axis 3 is out of range for f32[2,3] (at most 2)
            stack(f32[2,3], f32[2,4]) → error: stack operand 1 does not match operand 0: [2,3] and [2,4] differ at axis 1 (3 vs 4)
            unstack(f32[2,3]) → f32[2], f32[2], f32[2]
            unstack(f32[?,3]) → error: unstack needs a known extent at axis 0, got f32[?,3]
            slice(f32[2,5]) → f32[2,3]
            slice(f32[2,5]) → f32[2,5]
            slice(f32[2,5]) → f32[2,5]
            slice(f32[2,5]) → f32[2,3]
            slice(f32[2,5]) → f32[2,0]
            slice(f32[2,?]) → f32[2,?]
            slice(f32[2,5]) → error: slice on axis 1: begin 3 is after end 1 (extent 5, stride 1)
            slice(f32[2,5]) → error: slice on axis 1: end 3 is after begin 1 with negative stride -1 (extent 5)
            slice(f32[2,5]) → error: slice stride on axis 1 is 0
            slice(f32[2,5]) → error: slice axis 2 is out of range for rank 2
            slice(f32[2,5]) → error: slice has 1 axes but 2 begin and 1 end values
            slice(f32[2,5]) → error: slice has 1 axes but 2 strides
            slice(f32[2,5]) → error: slice axes [1,1] repeat axis 1
            tile(f32[1,?,2]) → f32[2,?,6]
            tile(f32[1,2]) → error: tile repeats has 1 item but the op needs 2
            tile(f32[1,2]) → error: tile repeats [0,1] has 0 at index 0; items must be ≥ 1
            pad(f32[2,3]) → f32[2,6]
            pad(f32[2,3]) → f32[2,7]
            pad(f32[2,?]) → f32[2,?]
            pad(f32[2,3]) → error: pad border 'reflect' needs padding within the extent 3 at axis 1 (reads coordinates -3 to 2)
            pad(f32[2,3]) → error: pad border 'reflect-even' needs padding within the extent 3 at axis 1 (reads coordinates 0 to 6)
            pad(f32[2,3]) → error: pad padding has 1 item but the op needs 2
            pad(f32[2,3]) → error: pad does not support border 'ignore'
            pad(i32[2]) → error: pad input must be f32, got i32[2]
            gather(f32[2,10,3], i32[4,5]) → f32[2,4,5,3]
            gather(bool[10], i32[]) → bool[]
            gather(f32[10], f32[2]) → error: gather indices must be i32, got f32[2]
            gather(f32[10], i32[2]) → error: gather axis 1 is out of range for f32[10]
            cast(f32[2,?]) → i32[2,?]
            cast(i32[]) → bool[]
        "#]],
    );
}

#[test]
fn resampling_and_roi() {
    let up = |factor: &[usize], border| Op::MultilinearUpsample {
        factor: factor.to_vec(),
        method: ResampleMethod::Symmetric,
        border,
    };
    let roi = Op::RoiPool {
        op: RoiPoolOp::Max,
        output_size: vec![7, 7],
    };
    let resample = Op::RoiResample {
        output_size: vec![2, 3],
        method: ResampleMethod::Aligned,
    };
    check(
        &[
            (up(&[2, 2], Border::Replicate), &["f32[1,3,4,5]"]),
            (up(&[2, 3], Border::Constant), &["f32[1,3,?,5]"]),
            (up(&[2], Border::Replicate), &["f32[1,3,4,5]"]),
            (up(&[2, 0], Border::Replicate), &["f32[1,3,4,5]"]),
            (up(&[2, 2], Border::Reflect), &["f32[1,3,4,5]"]),
            (up(&[], Border::Replicate), &["f32[1,3]"]),
            (roi.clone(), &["f32[1,256,14,14]", "f32[10,4]", "i32[10]"]),
            (roi.clone(), &["f32[1,256,14,14]", "f32[?,4]", "i32[10]"]),
            (resample.clone(), &["f32[2,8,14,14]", "f32[5,4]", "i32[5]"]),
            (roi.clone(), &["f32[1,256,14,14]", "f32[10,5]", "i32[10]"]),
            (roi.clone(), &["f32[1,256,14,14]", "f32[10,4]", "i32[9]"]),
            (roi.clone(), &["f32[1,256,14,14]", "f32[10,4]", "f32[10]"]),
            (roi.clone(), &["f32[1,256,14]", "f32[10,4]", "i32[10]"]),
        ],
        expect![[r#"
            multilinear_upsample(f32[1,3,4,5]) → f32[1,3,8,10]
            multilinear_upsample(f32[1,3,?,5]) → f32[1,3,?,15]
            multilinear_upsample(f32[1,3,4,5]) → error: multilinear_upsample factor has 1 item but the op needs 2
            multilinear_upsample(f32[1,3,4,5]) → error: multilinear_upsample factor [2,0] has 0 at index 1; items must be ≥ 1
            multilinear_upsample(f32[1,3,4,5]) → error: multilinear_upsample does not support border 'reflect' (only 'constant' and 'replicate')
            multilinear_upsample(f32[1,3]) → error: multilinear_upsample input must have rank ≥ 3 ([N,C,spatial…]), got f32[1,3]
            max_roi_pool(f32[1,256,14,14], f32[10,4], i32[10]) → f32[10,256,7,7]
            max_roi_pool(f32[1,256,14,14], f32[?,4], i32[10]) → f32[10,256,7,7]
            roi_resample(f32[2,8,14,14], f32[5,4], i32[5]) → f32[5,8,2,3]
            max_roi_pool(f32[1,256,14,14], f32[10,5], i32[10]) → error: max_roi_pool rois must have shape [R,4], got f32[10,5]
            max_roi_pool(f32[1,256,14,14], f32[10,4], i32[9]) → error: max_roi_pool rois f32[10,4] and batch_index i32[9] disagree on the ROI count
            max_roi_pool(f32[1,256,14,14], f32[10,4], f32[10]) → error: max_roi_pool batch_index must be i32, got f32[10]
            max_roi_pool(f32[1,256,14], f32[10,4], i32[10]) → error: max_roi_pool output_size has 2 items but the op needs 1
        "#]],
    );
}
