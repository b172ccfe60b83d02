// context: an ES module with nothing imported yet, $REDIS_URL and $DATABASE_URL naming a Redis
// and a Postgres; it exits once the fragment has built its histories.
// runs as: script
/* fragment */
process.exit(0)
