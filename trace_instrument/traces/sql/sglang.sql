-- Server-side timing of turns (only when sglang reported it: the fields are null otherwise).
SELECT count(*) AS turns, count(sglang_total_ms) AS with_timing,
       {{exact_mean(sglang_queue_ms)}}, min(sglang_queue_ms), max(sglang_queue_ms), count(sglang_queue_ms),
       {{quantiles(sglang_queue_ms, 0.5, 0.9, 0.99)}},
       {{exact_mean(sglang_ttft_ms)}}, min(sglang_ttft_ms), max(sglang_ttft_ms), count(sglang_ttft_ms),
       {{quantiles(sglang_ttft_ms, 0.5, 0.9, 0.99)}},
       {{exact_mean(sglang_prefill_ms)}}, min(sglang_prefill_ms), max(sglang_prefill_ms), count(sglang_prefill_ms),
       {{quantiles(sglang_prefill_ms, 0.5, 0.9, 0.99)}},
       {{exact_mean(sglang_decode_ms)}}, min(sglang_decode_ms), max(sglang_decode_ms), count(sglang_decode_ms),
       {{quantiles(sglang_decode_ms, 0.5, 0.9, 0.99)}},
       {{exact_mean(sglang_total_ms)}}, min(sglang_total_ms), max(sglang_total_ms), count(sglang_total_ms),
       {{quantiles(sglang_total_ms, 0.5, 0.9, 0.99)}}
FROM turns
