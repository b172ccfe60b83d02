// `express4` is express@4 installed under an alias for the adapter tests; its API used here is
// the same as Express 5's, so it borrows @types/express.
declare module 'express4' {
  import express from 'express'
  export default express
}
