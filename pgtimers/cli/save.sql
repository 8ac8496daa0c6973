-- Named queries of `pgtimers save` (pgtimers/cli/save.py). Parameters are %(name)s (psycopg).

-- name: save_timer
-- An option not given (None) takes timers.save's default.
SELECT row_to_json(s) FROM timers.save(
    %(name)s, %(schedule)s, %(sql)s, enabled => %(enabled)s, timezone => %(timezone)s,
    catch_up => %(catch_up)s, start_at => %(start_at)s, end_at => %(end_at)s,
    max_runs => %(max_runs)s, timeout => %(timeout)s::interval, locked => %(locked)s,
    test_clock => %(test_clock)s, retries => coalesce(%(retries)s::integer, 0),
    retry_delay => coalesce(%(retry_delay)s::interval, interval '30 seconds'),
    pause_after => %(pause_after)s::integer, jitter => %(jitter)s::interval,
    priority => coalesce(%(priority)s::integer, 0),
    catch_up_window => %(catch_up_window)s::interval, autonomous => %(autonomous)s,
    deadline => %(deadline)s::interval, history => coalesce(%(history)s, 'all')) s;
