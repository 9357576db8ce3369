// The one place the vendored libraries are imported: the rest of the
// interface uses `html` (htm bound to Preact) and the hooks from here.
import { h, render, Fragment } from '../vendor/preact.mjs';
import htm from '../vendor/htm.mjs';

export { render, Fragment };
export { useState, useEffect, useRef, useCallback, useMemo } from '../vendor/hooks.mjs';
export const html = htm.bind(h);
