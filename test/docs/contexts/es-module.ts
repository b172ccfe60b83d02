// context: any .ts file of your project that is an ES module (top-level await allowed); it
// exits once the fragment has run.
// runs as: script
/* fragment */
process.exit(0)
