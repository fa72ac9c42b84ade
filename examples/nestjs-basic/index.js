// The compiled app (tsc writes dist/ from src/). Run from the repository root: npm run example nestjs-basic
import './dist/main.js';
