-- How many samples the CSV rows say were trained (a TRAIN_UPDATE row).
SELECT count(*) FROM entities WHERE train_step IS NOT NULL
