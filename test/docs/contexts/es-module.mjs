// context: any .mjs file of your project (an ES module); it exits once the fragment has run.
// runs as: script
/* fragment */
process.exit(0)
