// Express 4 is installed under the alias `express4` to test both majors; it has the same API surface as far as the adapter goes.
declare module 'express4' {
  import express = require('express');
  export = express;
}
