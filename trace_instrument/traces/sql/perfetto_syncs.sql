-- Weight syncs: one instant per SYNC_PARAMS row.
SELECT ts, step, file_id FROM events WHERE code = {{event(SYNC_PARAMS)}} ORDER BY ts
