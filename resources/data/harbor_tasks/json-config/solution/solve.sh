printf '{"name": "harbor", "workers": 4, "debug": false}\n' > config.json
