// context: an ES module whose fragment names machines that are not this one (a production
// Redis Cluster's nodes): it is type-checked with the others, never run, so that no test
// connects anywhere but 127.0.0.1.
// runs as: typecheck
/* fragment */
export {}
