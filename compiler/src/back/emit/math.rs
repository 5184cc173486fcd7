//! Inline math for generated kernels: the same code serves scalars (`f32`) and
//! vectors (`f32x4`); [`Cx::lanes`] chooses.
//!
//! Cranelift has no transcendental functions, so `exp`, `log`, `tanh`, `sin`, `cos`,
//! `atan` and friends are polynomial approximations built from adds, multiplies and bit
//! tricks (no calls, so they vectorize). Max errors are measured by
//! `back::tests::math_accuracy` against f64 `std` on a dense sweep (run with
//! `cargo test -p nnefc-compiler --lib math_accuracy -- --nocapture`) and are quoted on
//! each function (derived functions in `expr.rs`: asin 2.1e-7, acos 3.2e-7, sinh 1.2e-7,
//! softplus 1.1e-7, atanh 9.6e-8, asinh 1.4e-7, same measure). No `erf`: no IR op needs it
//! (NNEF's gelu is sigmoid-based). Not handled: denormal inputs to `log` (see [`Cx::log`]),
//! `exp` overflow (∞ from x > 88.376, a factor √2 early; see
//! [`Cx::exp`]). NaN and ±∞ give what the interpreter (f64 `std`) gives; each function
//! says how.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F32X4, I32, I32X4};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

/// What the target can do, as far as the emitter cares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caps {
    /// `fma` lowers to one instruction (never emit it otherwise: it becomes libcalls).
    pub fma: bool,
    /// x86: prefer `bitselect(fcmp)` (→ `maxps`/`minps`) over `fmax`/`fmin`.
    pub x86: bool,
}

/// A builder plus the lane count values are computed at.
pub(crate) struct Cx<'a, 'b> {
    pub b: &'a mut FunctionBuilder<'b>,
    pub lanes: usize,
    pub caps: Caps,
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// 1.5·2²³: adding it rounds a float of magnitude < 2²² to an integer in the low bits.
const MAGIC: f32 = 12_582_912.0;

impl Cx<'_, '_> {
    pub fn fty(&self) -> Type {
        if self.lanes == 4 { F32X4 } else { F32 }
    }
    pub fn ity(&self) -> Type {
        if self.lanes == 4 { I32X4 } else { I32 }
    }
    pub fn fc(&mut self, x: f32) -> Value {
        let s = self.b.ins().f32const(x);
        if self.lanes == 4 {
            self.b.ins().splat(F32X4, s)
        } else {
            s
        }
    }
    pub fn ic(&mut self, x: i32) -> Value {
        let s = self.b.ins().iconst(I32, i64::from(x));
        if self.lanes == 4 {
            self.b.ins().splat(I32X4, s)
        } else {
            s
        }
    }
    pub fn f2i_bits(&mut self, x: Value) -> Value {
        let t = self.ity();
        self.b.ins().bitcast(t, MemFlagsData::new(), x)
    }
    pub fn i2f_bits(&mut self, x: Value) -> Value {
        let t = self.fty();
        self.b.ins().bitcast(t, MemFlagsData::new(), x)
    }
    /// A float comparison as a selector usable by [`Cx::sel`].
    pub fn fcmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(cc, a, b)
    }
    pub fn icmp(&mut self, cc: IntCC, a: Value, b: Value) -> Value {
        self.b.ins().icmp(cc, a, b)
    }
    /// `c ? a : b` for a selector from [`Cx::fcmp`]/[`Cx::icmp`] (scalar i8 or lane mask).
    pub fn sel(&mut self, c: Value, a: Value, b: Value) -> Value {
        if self.lanes == 4 {
            let ty = self.b.func.dfg.value_type(a);
            let m = if self.b.func.dfg.value_type(c) == ty {
                c
            } else {
                self.b.ins().bitcast(ty, MemFlagsData::new(), c)
            };
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(c, a, b)
        }
    }
    /// IEEE 754-2019 `maximum` (the interpreter's `max`): NaN when either operand is NaN.
    /// aarch64: one `fmax` (exactly `maximum`, +0 above −0). x86: `maxps a, b` returns its
    /// second operand when either is NaN, so a NaN in `b` already comes through; OR-ing in
    /// the `cmpunordps a, a` mask turns a NaN in `a` into NaN too: three instructions
    /// (Cranelift's own `fmax` is eight, plus branches when scalar). A tie of +0 and −0
    /// gives `b` on x86 (the one disagreement with `maximum`; `relu` = max(x, +0) is +0).
    pub fn fmax(&mut self, a: Value, b: Value) -> Value {
        if !self.caps.x86 {
            return self.b.ins().fmax(a, b);
        }
        let c = self.fcmp(FloatCC::LessThan, b, a);
        let m = self.sel(c, a, b);
        self.nan_from(a, m)
    }
    /// IEEE 754-2019 `minimum`; costs and the ±0 caveat as [`Cx::fmax`].
    pub fn fmin(&mut self, a: Value, b: Value) -> Value {
        if !self.caps.x86 {
            return self.b.ins().fmin(a, b);
        }
        let c = self.fcmp(FloatCC::LessThan, a, b);
        let m = self.sel(c, a, b);
        self.nan_from(a, m)
    }
    /// `m`, or NaN where `a` is NaN: vectors OR the unordered mask in (all ones is a NaN);
    /// scalars select (compare and a predictable branch).
    fn nan_from(&mut self, a: Value, m: Value) -> Value {
        let u = self.fcmp(FloatCC::Unordered, a, a);
        if self.lanes == 4 {
            let ty = self.fty();
            let mask = self.b.ins().bitcast(ty, MemFlagsData::new(), u);
            self.b.ins().bor(m, mask)
        } else {
            self.b.ins().select(u, a, m)
        }
    }
    /// max(x, c) for a constant `c` that is not NaN, when the sign of a zero result does
    /// not matter: one instruction on both targets (x86 `maxps c, x` passes a NaN `x`
    /// through as its second operand).
    pub fn fmax_const(&mut self, x: Value, c: f32) -> Value {
        let cv = self.fc(c);
        if !self.caps.x86 {
            return self.b.ins().fmax(x, cv);
        }
        let lt = self.fcmp(FloatCC::LessThan, x, cv);
        self.sel(lt, cv, x)
    }
    /// min(x, c), as [`Cx::fmax_const`].
    pub fn fmin_const(&mut self, x: Value, c: f32) -> Value {
        let cv = self.fc(c);
        if !self.caps.x86 {
            return self.b.ins().fmin(x, cv);
        }
        let lt = self.fcmp(FloatCC::LessThan, cv, x);
        self.sel(lt, cv, x)
    }
    /// |a| with the sign of b (bit operations: x64 has no vector `fcopysign`).
    pub fn copysign(&mut self, a: Value, b: Value) -> Value {
        let ai = self.f2i_bits(a);
        let bi = self.f2i_bits(b);
        let mag = self.ic(0x7fff_ffff);
        let sign = self.ic(i32::MIN);
        let am = self.b.ins().band(ai, mag);
        let bs = self.b.ins().band(bi, sign);
        let r = self.b.ins().bor(am, bs);
        self.i2f_bits(r)
    }
    /// a·b + c, fused when the target has a native fma.
    pub fn mla(&mut self, a: Value, b: Value, c: Value) -> Value {
        if self.caps.fma {
            self.b.ins().fma(a, b, c)
        } else {
            let p = self.b.ins().fmul(a, b);
            self.b.ins().fadd(p, c)
        }
    }
    /// Horner evaluation of `coef[0]·xⁿ + … + coef[n]`.
    pub fn poly(&mut self, x: Value, coef: &[f32]) -> Value {
        let mut acc = self.fc(coef.first().copied().unwrap_or(0.0));
        for &c in coef.iter().skip(1) {
            let cv = self.fc(c);
            acc = self.mla(acc, x, cv);
        }
        acc
    }
    pub fn fadd(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fadd(a, b)
    }
    pub fn fsub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fsub(a, b)
    }
    pub fn fmul(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fmul(a, b)
    }
    pub fn fdiv(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fdiv(a, b)
    }
    pub fn fmulc(&mut self, a: Value, c: f32) -> Value {
        let cv = self.fc(c);
        self.b.ins().fmul(a, cv)
    }
    pub fn faddc(&mut self, a: Value, c: f32) -> Value {
        let cv = self.fc(c);
        self.b.ins().fadd(a, cv)
    }
    /// c − a
    pub fn crsub(&mut self, c: f32, a: Value) -> Value {
        let cv = self.fc(c);
        self.b.ins().fsub(cv, a)
    }

    /// eˣ. Cody–Waite reduction `x = n·ln2 + r`, Cephes degree-5 polynomial, `2ⁿ` built
    /// in the exponent bits. Inputs are clamped to [−88, 88.5] (NaN passes through), where
    /// the ends make `n` = −127 and 128: the exponent field becomes 0 (2ⁿ reads as +0) or
    /// 255 (+∞), so e^−∞ = 0 and e^+∞ = +∞ with no extra instruction. The price: results
    /// overflow to ∞ from x > 88.376 instead of 88.723, and results below 2⁻¹²⁶
    /// (x < −87.68) flush to 0. Measured max relative error 8.1e-8 on [−87, 88].
    pub fn exp(&mut self, x: Value) -> Value {
        let x = self.fmin_const(x, 88.5);
        let x = self.fmax_const(x, -88.0);
        let l2e = self.fc(LOG2E);
        let magic = self.fc(MAGIC);
        let t = self.mla(x, l2e, magic);
        let n = self.fsub(t, magic);
        let c1 = self.fc(-0.693_359_4);
        let c2 = self.fc(2.121_944_4e-4);
        let r = self.mla(n, c1, x);
        let r = self.mla(n, c2, r);
        let p = self.poly(
            r,
            &[
                1.987_569_1e-4,
                1.398_2e-3,
                8.333_452e-3,
                4.166_579_6e-2,
                0.166_666_65,
                0.5,
            ],
        );
        let r2 = self.fmul(r, r);
        let one = self.fc(1.0);
        let pr = self.mla(p, r2, r);
        let y = self.fadd(pr, one);
        // 2ⁿ: the low mantissa bits of t hold n (two's complement around MAGIC's bits).
        let tb = self.f2i_bits(t);
        let mb = self.ic(MAGIC.to_bits() as i32 - 127);
        let e = self.b.ins().isub(tb, mb);
        let e = self.b.ins().ishl_imm_u(e, 23);
        let scale = self.i2f_bits(e);
        self.fmul(y, scale)
    }

    /// ln x. Exponent/mantissa split with the mantissa in [√½, √2), Cephes logf
    /// polynomial. ln 0 = −∞, ln(x<0) = NaN, ln ∞ = ∞, NaN → NaN. Denormal x is read as
    /// its exponent field says (inaccurate: ln 1e-40 gives about −87.8, not −92.1). Scaling
    /// denormals by 2²⁵ first was tried: five instructions that made `log` 25% slower
    /// (1.6 → 2.0 ns/element) for inputs models do not produce.
    /// Measured max error 7.5e-8 (absolute, scaled by 1/max(1,|ln x|)) on [1e-30, 1e30].
    pub fn log(&mut self, x: Value) -> Value {
        let bits = self.f2i_bits(x);
        let e = self.b.ins().ushr_imm_u(bits, 23);
        let m_mask = self.ic(0x007f_ffff);
        let half = self.ic(0x3f00_0000);
        let mb = self.b.ins().band(bits, m_mask);
        let mb = self.b.ins().bor(mb, half);
        let m = self.i2f_bits(mb); // [0.5, 1)
        let bias = self.ic(126);
        let e = self.b.ins().isub(e, bias);
        let ity = self.fty();
        let ef = self.b.ins().fcvt_from_sint(ity, e);
        let sqrthf = self.fc(std::f32::consts::FRAC_1_SQRT_2);
        let small = self.fcmp(FloatCC::LessThan, m, sqrthf);
        let one = self.fc(1.0);
        let zero = self.fc(0.0);
        let dec = self.sel(small, one, zero);
        let ef = self.fsub(ef, dec);
        let madd = self.sel(small, m, zero);
        let m2 = self.fadd(m, madd);
        let m = self.fsub(m2, one);
        let z = self.fmul(m, m);
        let p = self.poly(
            m,
            &[
                7.037_683_6e-2,
                -1.151_461e-1,
                1.167_699_9e-1,
                -1.242_014_1e-1,
                1.424_932_3e-1,
                -1.666_805_8e-1,
                2.000_071_4e-1,
                -2.499_999_4e-1,
                3.333_333e-1,
            ],
        );
        let pm = self.fmul(p, m);
        let y = self.fmul(pm, z);
        let c2 = self.fc(-2.121_944_4e-4);
        let y = self.mla(ef, c2, y);
        let mhalf = self.fc(-0.5);
        let y = self.mla(z, mhalf, y);
        let r = self.fadd(m, y);
        let c1 = self.fc(0.693_359_4);
        let r = self.mla(ef, c1, r);
        // Special cases, last one wins.
        let inf = self.fc(f32::INFINITY);
        let is_inf = self.fcmp(FloatCC::Equal, x, inf);
        let r = self.sel(is_inf, inf, r);
        let ninf = self.fc(f32::NEG_INFINITY);
        let is_zero = self.fcmp(FloatCC::Equal, x, zero);
        let r = self.sel(is_zero, ninf, r);
        // NaN unless x ≥ 0 (x < 0 or NaN); an ordered compare, as aarch64 has no vector
        // unordered ones.
        let nan = self.fc(f32::NAN);
        let ok = self.fcmp(FloatCC::GreaterThanOrEqual, x, zero);
        self.sel(ok, r, nan)
    }

    /// tanh x = sign(x)·(1 − 2/(e^{2|x|} + 1)). Measured max abs error 1.1e-7 on [−10, 10].
    pub fn tanh(&mut self, x: Value) -> Value {
        let a = self.b.ins().fabs(x);
        let a2 = self.fadd(a, a);
        let e = self.exp(a2);
        let e1 = self.faddc(e, 1.0);
        let two = self.fc(2.0);
        let q = self.fdiv(two, e1);
        let r = self.crsub(1.0, q);
        self.copysign(r, x)
    }

    /// 1/(1+e⁻ˣ). Measured max abs error 8.9e-8 on [−30, 30].
    pub fn sigmoid(&mut self, x: Value) -> Value {
        let n = self.b.ins().fneg(x);
        let e = self.exp(n);
        let d = self.faddc(e, 1.0);
        let one = self.fc(1.0);
        self.fdiv(one, d)
    }

    /// sin or cos (Cephes sinf/cosf): reduce by multiples of π/4 (three-part π/4), pick
    /// the sine or cosine polynomial per octant. Accurate for |x| ≲ 8192;
    /// measured max abs error 7.7e-8 on [−100, 100].
    pub fn sincos(&mut self, x: Value, cos: bool) -> Value {
        let ax = self.b.ins().fabs(x);
        let fopi = self.fc(std::f32::consts::FRAC_2_PI * 2.0); // 4/π
        let y = self.fmul(ax, fopi);
        // j = trunc(y); j = (j + 1) & ~1 (so j is even), y = j
        let ity = self.ity();
        let fty = self.fty();
        let j = self.b.ins().fcvt_to_sint_sat(ity, y);
        let one_i = self.ic(1);
        let j = self.b.ins().iadd(j, one_i);
        let not1 = self.ic(!1);
        let j = self.b.ins().band(j, not1);
        let yf = self.b.ins().fcvt_from_sint(fty, j);
        // Extended-precision x − y·π/4.
        let dp1 = self.fc(-0.785_156_25);
        let dp2 = self.fc(-2.418_756_5e-4);
        let dp3 = self.fc(-3.774_895e-8);
        let z = self.mla(yf, dp1, ax);
        let z = self.mla(yf, dp2, z);
        let z = self.mla(yf, dp3, z);
        let zz = self.fmul(z, z);
        // cos poly: 1 − z²/2 + z⁴·P(z²)
        let pc = self.poly(zz, &[2.443_315_7e-5, -1.388_731_6e-3, 4.166_664_6e-2]);
        let pc = self.fmul(pc, zz);
        let pc = self.fmul(pc, zz);
        let hz = self.fmulc(zz, 0.5);
        let pc = self.fsub(pc, hz);
        let pc = self.faddc(pc, 1.0);
        // sin poly: z + z³·P(z²)
        let ps = self.poly(zz, &[-1.951_529_6e-4, 8.332_161e-3, -1.666_665_5e-1]);
        let ps = self.fmul(ps, zz);
        let ps = self.mla(ps, z, z);
        // Octant j (even, 0..7 after masking); for sin: j&2 picks cos poly, j&4 flips sign.
        // For cos, shift the octant by 2 and the sign flips with (j+2)&4.
        let j = if cos {
            let two = self.ic(2);
            self.b.ins().iadd(j, two)
        } else {
            j
        };
        let two = self.ic(2);
        let four = self.ic(4);
        let zero_i = self.ic(0);
        let j2 = self.b.ins().band(j, two);
        let use_cos = self.icmp(IntCC::NotEqual, j2, zero_i);
        let r = self.sel(use_cos, pc, ps);
        let j4 = self.b.ins().band(j, four);
        let flip = self.icmp(IntCC::NotEqual, j4, zero_i);
        let nr = self.b.ins().fneg(r);
        let r = self.sel(flip, nr, r);
        let r = if cos {
            r
        } else {
            // sin is odd: give r the sign of x (a bit flip, so sin(−0) = −0).
            let xi = self.f2i_bits(x);
            let sign = self.ic(i32::MIN);
            let xs = self.b.ins().band(xi, sign);
            let ri = self.f2i_bits(r);
            let ri = self.b.ins().bxor(ri, xs);
            self.i2f_bits(ri)
        };
        // sin/cos of ±∞ or NaN is NaN (the reduction above would give a finite value).
        // (`|x| < ∞` is false exactly there; aarch64 has no vector unordered compares.)
        let inf = self.fc(f32::INFINITY);
        let finite = self.fcmp(FloatCC::LessThan, ax, inf);
        let nan = self.fc(f32::NAN);
        self.sel(finite, r, nan)
    }

    /// atan x (Cephes atanf): reduce to |x| ≤ tan(π/8), odd polynomial.
    /// Measured max abs error 1.1e-7 on [−100, 100].
    pub fn atan(&mut self, x: Value) -> Value {
        let ax = self.b.ins().fabs(x);
        let t3p8 = self.fc(2.414_213_6);
        let tp8 = self.fc(0.414_213_57);
        let big = self.fcmp(FloatCC::GreaterThan, ax, t3p8);
        let mid = self.fcmp(FloatCC::GreaterThan, ax, tp8);
        let one = self.fc(1.0);
        let m1 = self.fc(-1.0);
        // big: -1/ax, offset π/2; mid: (ax-1)/(ax+1), offset π/4; else ax, 0.
        let axp1 = self.fadd(ax, one);
        let axm1 = self.fsub(ax, one);
        let num = self.sel(mid, axm1, ax);
        let num = self.sel(big, m1, num);
        let den = self.sel(mid, axp1, one);
        let den = self.sel(big, ax, den);
        let xr = self.fdiv(num, den);
        let zero = self.fc(0.0);
        let q = self.fc(std::f32::consts::FRAC_PI_4);
        let h = self.fc(std::f32::consts::FRAC_PI_2);
        let off = self.sel(mid, q, zero);
        let off = self.sel(big, h, off);
        let z = self.fmul(xr, xr);
        let p = self.poly(
            z,
            &[
                8.053_744_5e-2,
                -1.387_768_9e-1,
                1.997_771_1e-1,
                -3.333_295e-1,
            ],
        );
        let p = self.fmul(p, z);
        let r = self.mla(p, xr, xr);
        let r = self.fadd(r, off);
        self.copysign(r, x)
    }

    /// 1/x
    pub fn rcp(&mut self, x: Value) -> Value {
        let one = self.fc(1.0);
        self.fdiv(one, x)
    }

    /// Round half away from zero (C `round`).
    pub fn round(&mut self, x: Value) -> Value {
        let t = self.b.ins().trunc(x);
        let d = self.fsub(x, t);
        let ad = self.b.ins().fabs(d);
        let half = self.fc(0.5);
        let up = self.fcmp(FloatCC::GreaterThanOrEqual, ad, half);
        let one = self.fc(1.0);
        let s = self.copysign(one, x);
        let ts = self.fadd(t, s);
        self.sel(up, ts, t)
    }

    /// sign(x): 1 above 0, −1 below, and x itself for ±0 and NaN (as the interpreter).
    pub fn fsign(&mut self, x: Value) -> Value {
        let zero = self.fc(0.0);
        let one = self.fc(1.0);
        let mone = self.fc(-1.0);
        let pos = self.fcmp(FloatCC::GreaterThan, x, zero);
        let neg = self.fcmp(FloatCC::LessThan, x, zero);
        let r = self.sel(neg, mone, x);
        self.sel(pos, one, r)
    }

    /// xʸ = e^{y·ln|x|}, with the sign of a negative base for integer y (NaN for
    /// fractional y), 0ʸ = 0 (y>0) or ∞ (y<0), x⁰ = 1ʸ = 1. Differs from IEEE `pow` at
    /// (−1)^±∞ (NaN, not 1) and (−0)^(odd y < 0) (+∞, not −∞). Relative error grows with
    /// |y·ln x| (≈1e-6 for results near 1e6).
    pub fn pow(&mut self, x: Value, y: Value) -> Value {
        let ax = self.b.ins().fabs(x);
        let l = self.log(ax);
        let yl = self.fmul(y, l);
        let r = self.exp(yl);
        // Negative base: integer y keeps magnitude, odd y flips sign.
        let zero = self.fc(0.0);
        let yt = self.b.ins().trunc(y);
        let is_int = self.fcmp(FloatCC::Equal, yt, y);
        let half = self.fmulc(y, 0.5);
        let ht = self.b.ins().trunc(half);
        let even = self.fcmp(FloatCC::Equal, ht, half);
        let neg_r = self.b.ins().fneg(r);
        let signed = self.sel(even, r, neg_r);
        let nan = self.fc(f32::NAN);
        let negbase = self.sel(is_int, signed, nan);
        let xneg = self.fcmp(FloatCC::LessThan, x, zero);
        let r = self.sel(xneg, negbase, r);
        // Zero base.
        let inf = self.fc(f32::INFINITY);
        let ypos = self.fcmp(FloatCC::GreaterThan, y, zero);
        let yneg = self.fcmp(FloatCC::LessThan, y, zero);
        // 0^NaN stays NaN (r is e^(NaN·−∞) = NaN there).
        let zr = self.sel(yneg, inf, r);
        let zr = self.sel(ypos, zero, zr);
        let xz = self.fcmp(FloatCC::Equal, x, zero);
        let r = self.sel(xz, zr, r);
        // x⁰ = 1 and 1ʸ = 1 for every y, NaN and ±∞ included (IEEE `pow`; without this
        // 1^∞ would be e^(∞·0) = NaN).
        let one = self.fc(1.0);
        let y0 = self.fcmp(FloatCC::Equal, y, zero);
        let x1 = self.fcmp(FloatCC::Equal, x, one);
        let unit = self.b.ins().bor(y0, x1);
        self.sel(unit, one, r)
    }
}
