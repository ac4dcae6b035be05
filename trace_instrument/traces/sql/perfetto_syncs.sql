-- Weight syncs: one instant per SYNC_PARAMS row.
SELECT ts, step, file_id FROM events WHERE code = 19 ORDER BY ts
