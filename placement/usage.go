package placement

import (
	"math/bits"
	"time"
)

// Fair share with a memory of past use (Slurm's PriorityDecayHalfLife,
// HTCondor's PRIORITY_HALFLIFE, Kueue's usageHalfLifeDecayTime): what a
// user ran counts against it, halving every half-life, so one who just ran
// 10,000 core-hours does not start level with one who ran nothing. The
// state keeps each user's decayed use, and the scheduler adds it, as cores,
// to what the user runs now. Both call these, in integers: apply must give
// the same result on every server, whatever its floating point.

// Half-life bounds (a queue tree's usage_half_life; 0: no memory).
const (
	MinUsageHalfLife = int64(time.Hour)
	MaxUsageHalfLife = int64(365 * 24 * time.Hour)
)

// pow2Frac[j] is 2^(-j/64) in 32-bit fixed point.
var pow2Frac = [64]uint64{
	4294967296, 4248701965, 4202935003, 4157661043, 4112874773, 4068570940, 4024744348, 3981389855,
	3938502376, 3896076880, 3854108391, 3812591987, 3771522796, 3730896002, 3690706840, 3650950594,
	3611622603, 3572718252, 3534232978, 3496162267, 3458501653, 3421246719, 3384393094, 3347936457,
	3311872529, 3276197082, 3240905930, 3205994934, 3171459999, 3137297074, 3103502151, 3070071267,
	3037000500, 3004285971, 2971923842, 2939910317, 2908241642, 2876914102, 2845924021, 2815267765,
	2784941738, 2754942382, 2725266179, 2695909648, 2666869345, 2638141863, 2609723834, 2581611923,
	2553802834, 2526293303, 2499080105, 2472160047, 2445529972, 2419186755, 2393127307, 2367348571,
	2341847524, 2316621173, 2291666561, 2266980759, 2242560872, 2218404036, 2194507417, 2170868212,
}

// Decay is use v (any unit, v >= 0) after elapsed ns with a half-life of
// halfLife ns: v × 2^(-elapsed/halfLife), in steps of a 64th of the
// half-life (0 for v after 63 half-lives; v itself for elapsed <= 0 or no
// half-life).
func Decay(v, elapsed, halfLife int64) int64 {
	if v <= 0 || elapsed <= 0 || halfLife <= 0 {
		return max(v, 0)
	}
	whole := elapsed / halfLife
	if whole >= 63 {
		return 0
	}
	// The fraction in 64ths: (elapsed % halfLife) × 64 / halfLife, without
	// overflow (halfLife < 2^55).
	hi, lo := bits.Mul64(uint64(elapsed%halfLife), 64)
	step, _ := bits.Div64(hi, lo, uint64(halfLife))
	v >>= whole
	hi, lo = bits.Mul64(uint64(v), pow2Frac[step])
	return int64(hi<<32 | lo>>32)
}

// UsageRate is decayed use v, in milli-core-seconds, as the millicores
// that, held steadily, leave that use in the decay's memory: v divided by
// the mean life halfLife/ln 2 (what the scheduler adds to a user's running
// cores).
func UsageRate(v, halfLife int64) int64 {
	if v <= 0 || halfLife <= 0 {
		return 0
	}
	// mean life in ms: halfLife / ln 2 = halfLife × 1.4427 (10000/6931).
	meanMs := halfLife / int64(time.Millisecond) * 10000 / 6931
	if meanMs <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(v), 1000)
	if hi >= uint64(meanMs) {
		return 1 << 62
	}
	q, _ := bits.Div64(hi, lo, uint64(meanMs))
	return int64(min(q, 1<<62))
}

// CoreSeconds is the use of cpuMilli millicores held for d ns, in
// milli-core-seconds.
func CoreSeconds(cpuMilli, d int64) int64 {
	if cpuMilli <= 0 || d <= 0 {
		return 0
	}
	secs, rest := d/int64(time.Second), d%int64(time.Second)
	return cpuMilli*secs + cpuMilli*(rest/int64(time.Millisecond))/1000
}
