-- The views every query reads: the whole run, or the samples generated in steps [{{lo}}, {{hi}}].
CREATE OR REPLACE TEMP VIEW entities AS
SELECT * FROM entities_all WHERE {{all}} OR gen_step BETWEEN {{lo}} AND {{hi}};
CREATE OR REPLACE TEMP VIEW events AS
SELECT * FROM events_all
WHERE {{all}} OR sample_id IN (SELECT sample_id FROM entities) OR (code = {{event(SYNC_PARAMS)}} AND step BETWEEN {{lo}} AND {{hi}});
CREATE OR REPLACE TEMP VIEW transitions AS
SELECT * FROM transitions_all WHERE {{all}} OR skey IN (SELECT skey FROM entities);
CREATE OR REPLACE TEMP VIEW trajectories AS
SELECT * FROM trajectories_all WHERE {{all}} OR global_step BETWEEN {{lo}} AND {{hi}};
CREATE OR REPLACE TEMP VIEW turns AS
SELECT * FROM turns_all WHERE {{all}} OR traj_id IN (SELECT traj_id FROM trajectories)
