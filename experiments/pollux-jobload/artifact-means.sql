-- The mean over the eight workloads of the average JCT, by policy and
-- relative load (the directory of each run's workload file), for the runs of
-- pollux-jobload-artifact.toml:
--   sqlite3 -header -column results/pollux-jobload-artifact.db < experiments/pollux-jobload/artifact-means.sql
WITH run AS (
  SELECT r.id, json_extract(r.axes, '$.policy') AS policy,
         json_extract(r.axes, '$."workload.path"') AS path, m.value AS avg_jct
  FROM runs r JOIN metrics m ON m.run_id = r.id AND m.name = 'avg_jct_s'
  WHERE r.status = 'complete'
)
SELECT policy,
       CASE WHEN path LIKE '%workloads-0.5/%' THEN '0.5'
            WHEN path LIKE '%workloads-1.5/%' THEN '1.5'
            WHEN path LIKE '%workloads-2.0/%' THEN '2.0'
            ELSE '1.0' END AS load,
       count(*) AS runs,
       round(avg(avg_jct)) AS mean_avg_jct_s
FROM run GROUP BY policy, load
ORDER BY CASE policy WHEN 'pollux' THEN 0 WHEN 'tiresias' THEN 1 ELSE 2 END, load;
