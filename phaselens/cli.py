def main():
    import phaselens.models, phaselens.ingest, phaselens.pipeline
    print("ok", phaselens.models.__file__)
