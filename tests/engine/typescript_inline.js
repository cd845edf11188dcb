// The TypeScript example (compiled by tsc to PROJECT/bin/index.js) as a Node.js Automation API inline
// program through the real Pulumi CLI: @pulumi/pulumi's Automation API serves the program in this
// process and passes the CLI --client (no pulumi-language-nodejs needed). Used by
// tests/engine/test_engine_typescript.py; prints one JSON document per operation.
//
//   node typescript_inline.js PROJECT   (env: ENGINE_HOME, PULUMI_HOME, PULUMI_BACKEND_URL, TS_CONFIG)
"use strict";
const path = require("path");
const project = path.resolve(process.argv[2]);
const auto = require(require.resolve("@pulumi/pulumi/automation", { paths: [project] }));

async function main() {
  const file = path.join(project, "bin", "index.js");
  const program = async () => {
    delete require.cache[require.resolve(file)]; // each operation runs the program afresh
    return require(file);
  };
  const pulumiCommand = await auto.PulumiCommand.get({ root: process.env.ENGINE_HOME, skipVersionCheck: true });
  const stack = await auto.LocalWorkspace.createOrSelectStack(
    { stackName: "example", projectName: "deepseek-typescript", program },
    {
      pulumiCommand,
      pulumiHome: process.env.PULUMI_HOME,
      projectSettings: { name: "deepseek-typescript", runtime: "nodejs", backend: { url: process.env.PULUMI_BACKEND_URL } },
    },
  );
  for (const [key, value] of Object.entries(JSON.parse(process.env.TS_CONFIG))) {
    await stack.setConfig(key, value);
  }
  const say = (operation, result) => console.log(JSON.stringify({ operation, ...result }));
  say("preview", { changes: (await stack.preview()).changeSummary });
  const up = await stack.up();
  const outputs = Object.fromEntries(Object.entries(up.outputs).map(([k, v]) => [k, v.secret ? "[secret]" : v.value]));
  say("up", { result: up.summary.result, changes: up.summary.resourceChanges, outputs });
  say("again", { changes: (await stack.preview({ expectNoChanges: true })).changeSummary });
  await stack.destroy();
  say("destroy", { left: ((await stack.exportStack()).deployment.resources || []).length });
}

main().catch((error) => {
  console.error(String(error && error.stack ? error.stack : error).slice(-8000));
  process.exit(1);
});
