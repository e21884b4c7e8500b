// `npm run build:plotly`: builds ../static/vendor/plotly/plotly-belvedere.min.js from plotly-belvedere.js,
// writes LICENSE.txt beside it (collect-licenses.mjs) and the precompressed .gz and .br copies that
// whitenoise serves to browsers that accept them (also under `make run`, which runs no collectstatic).
// With package-lock.json unchanged the four files come out byte for byte the same.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { constants, gzipSync, brotliCompressSync } from "node:zlib";
import * as esbuild from "esbuild";
import { collectLicenses } from "./collect-licenses.mjs";

const OUT_DIR = "../static/vendor/plotly";
const BUNDLE = "plotly-belvedere.min.js";
const TRACES = "scatter, heatmap, bar";
const { version } = JSON.parse(readFileSync("node_modules/plotly.js/package.json", "utf8"));
const pinned = JSON.parse(readFileSync("package.json", "utf8")).dependencies["plotly.js"];
if (version !== pinned) throw new Error(`node_modules has plotly.js ${version}, package.json pins ${pinned}: run npm ci`);

mkdirSync(OUT_DIR, { recursive: true });
const result = await esbuild.build({
  entryPoints: ["plotly-belvedere.js"],
  outfile: `${OUT_DIR}/${BUNDLE}`,
  bundle: true,
  minify: true,
  format: "iife",
  // As plotly.js's own esbuild-config.js does.
  target: "es2016",
  define: { global: "window", "define.amd": "false" },
  // The only stylesheet plotly.js imports is maplibre-gl's, for map traces, which are not bundled.
  loader: { ".css": "empty" },
  legalComments: "none",
  banner: {
    js: `/*! plotly.js v${version} (MIT, Plotly, Inc.), partial bundle for Belvedere: core + ${TRACES} traces. ` +
      "Licences of the bundled packages: LICENSE.txt beside this file. Rebuild: cd frontend && npm ci && npm run build:plotly */",
  },
  metafile: true,
  logLevel: "warning",
});
// maplibre-gl's stylesheet became an empty module (see loader above): none of maplibre-gl is in the bundle.
collectLicenses({
  meta: result.metafile, out: `${OUT_DIR}/LICENSE.txt`, bundle: BUNDLE, script: "npm run build:plotly",
  skip: (input) => input.endsWith(".css"),
});

const code = readFileSync(`${OUT_DIR}/${BUNDLE}`);
const gz = gzipSync(code, { level: 9 });
gz[9] = 3; // gzip header "OS" byte: Unix on every build machine, so the file does not depend on where it was built
const br = brotliCompressSync(code, {
  params: {
    [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
    [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
    [constants.BROTLI_PARAM_SIZE_HINT]: code.length,
  },
});
writeFileSync(`${OUT_DIR}/${BUNDLE}.gz`, gz);
writeFileSync(`${OUT_DIR}/${BUNDLE}.br`, br);
const kb = (n) => `${(n / 1024).toFixed(0)} KiB`;
console.log(`wrote ${OUT_DIR}/${BUNDLE}: ${kb(code.length)}, gzip ${kb(gz.length)}, brotli ${kb(br.length)} (plotly.js ${version}: ${TRACES})`);
