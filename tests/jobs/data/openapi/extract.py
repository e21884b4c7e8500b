"""Regenerate the extracts here: python extract.py VERSION=SPEC.json ... (e.g. v0.0.45=openapi_spec_v45.json).

Each spec comes from the repository, commit and path written in SOURCES (``git show COMMIT:PATH``).
"""
import json
import sys
KEEP = ('type', 'properties', 'items', '$ref', 'enum', 'format')
def extract(spec: dict, version: str) -> dict:
    schemas = spec['components']['schemas']
    need, seen = [f'{version}_job_info', f'{version}_job'], {}
    def reduce(node):
        if '$ref' in node:
            name = node['$ref'].split('/')[-1]
            need.append(name)
            return {'$ref': name}
        out = {}
        for key in KEEP:
            if key not in node: continue
            if key == 'properties':
                out[key] = {name: reduce(value) for name, value in node[key].items()}
            elif key == 'items':
                out[key] = reduce(node[key])
            else:
                out[key] = node[key]
        return out
    while need:
        name = need.pop()
        if name not in seen:
            seen[name] = None
            seen[name] = reduce(schemas[name])
    return dict(sorted(seen.items()))
out = {}
for argument in sys.argv[1:]:
    version, path = argument.split('=', 1)
    with open(path, encoding='utf-8') as handle:
        out[version] = extract(json.load(handle), version)

SOURCES = {
    'v0.0.40': ('jontk/slurm-client', '84c1fefa530ec3de551245c5f6cbf34808db9866', 'openapi-specs/slurm-v0.0.40.json',
                'slurmrestd of Slurm 25.05.0 with -d v0.0.40 (info.version "Slurm-25.05.0"); SchedMD never committed a v0.0.40 spec, and its properties of v0.0.40_job_info, v0.0.40_job and v0.0.40_step are exactly the paths of PARSER_ARRAY(JOB_INFO), (JOB) and (STEP) in SchedMD/slurm src/plugins/data_parser/v0.0.40/parsers.c at 68b394a40636ae0795203dccf9eacec694ad3315'),
}
for v in [41,42,43,44,45]:
    SOURCES[f'v0.0.{v}'] = ('SchedMD/slurm', '284c3b95f08a2dc2478499837b03355e1b9c5c75', f'testsuite/python/data/openapi_specs/openapi_spec_v{v}.json', 'SchedMD\'s own spec file')
for version, schemas in out.items():
    repo, commit, path, note = SOURCES[version]
    lines = ['{', f'"source": {json.dumps({"repository": repo, "commit": commit, "path": path, "note": note, "extracted": "components.schemas reachable from " + version + "_job_info and " + version + "_job; only type, properties, items, $ref (schema name), enum and format kept"})},', '"schemas": {']
    items = list(schemas.items())
    for i, (name, schema) in enumerate(items):
        lines.append(f'{json.dumps(name)}: {json.dumps(schema, separators=(",", ":"))}' + (',' if i < len(items) - 1 else ''))
    lines += ['}', '}']
    open(f'{version}.json', 'w', encoding='utf-8').write('\n'.join(lines) + '\n')
