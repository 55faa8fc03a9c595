"""The browser judge (`orchestrator judge ... --web`): the blind judge served to a web browser
on the same `JudgeSource` as the Textual judge. `session` holds the queue and the label rules,
`media` what the browser gets of the videos and stills, `guard` the token and cross-site
checks, `app` the HTTP interface (Starlette), `serve` the server (uvicorn); `static/` is the
page."""
