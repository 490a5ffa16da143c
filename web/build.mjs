// Builds the dashboard into host/internal/webui/dist, which the baton
// binary embeds: one script (app.js), one style sheet (app.css) and
// index.html, under names that never change. The output depends only on
// the sources and the pinned packages, so a second build writes the same
// bytes and `make generate` leaves git clean.
import * as esbuild from "esbuild";
import { copyFile, mkdir, readdir, rm } from "node:fs/promises";

const dist = new URL("../host/internal/webui/dist/", import.meta.url);

// Remove what an earlier build left, but keep the folder (and its
// .gitkeep-free layout): the Go package embeds whatever is there.
await mkdir(dist, { recursive: true });
for (const name of await readdir(dist)) {
  await rm(new URL(name, dist), { recursive: true });
}

await esbuild.build({
  entryPoints: { app: "src/main.tsx" },
  outdir: dist.pathname,
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2022"],
  legalComments: "none",
  charset: "utf8",
  sourcemap: false,
  logLevel: "warning",
  jsx: "automatic",
  jsxImportSource: "preact",
});
await copyFile(new URL("src/index.html", import.meta.url), new URL("index.html", dist));
